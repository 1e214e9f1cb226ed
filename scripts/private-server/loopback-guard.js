'use strict';
// Preloaded into every process of the private server (NODE_OPTIONS=--require ...), so that the server we test
// against never talks to anything but this machine's loopback interface.
//
// 1. The backend calls the Steam Web API (api.steampowered.com) at start whenever a Steam key is configured, and
//    retries every second while that fails. `screeps start` refuses to run without a key (it would need a local
//    Steam client instead), so we configure a dummy key and answer the call here: `steam-webapi`'s `ready()`
//    succeeds at once without a request. Nothing else in @screeps/* or screepsmod-auth calls out at start.
// 2. A guard for everything else: a TCP connection to a host that is not loopback, or a DNS lookup of a name
//    that is not `localhost`, fails with an error and leaves a line starting with `[loopback-guard] blocked`
//    in the process's log. Unix sockets (the storage process listens on one) are allowed.
const Module = require('module');
const net = require('net');
const dns = require('dns');

const TAG = '[loopback-guard]';

function isLoopbackHost(host) {
  if (host === undefined || host === null || host === '') return true; // node's default is localhost
  const h = String(host).toLowerCase().replace(/^\[|\]$/g, '');
  return (
    h === 'localhost' ||
    h.endsWith('.localhost') ||
    h === '::1' ||
    /^127\.\d+\.\d+\.\d+$/.test(h) ||
    /^::ffff:127\.\d+\.\d+\.\d+$/.test(h)
  );
}

// Socket#connect(options[, cb]) | (path[, cb]) | (port[, host][, cb]); also reached by http(s).request and tls.
function connectTarget(args) {
  let first = args[0];
  if (Array.isArray(first)) first = first[0]; // node's internal normalized form: [options, cb]
  if (first !== null && typeof first === 'object') {
    if (first.path) return null;
    return { host: first.host, port: first.port };
  }
  if (typeof first === 'string' && !/^\d+$/.test(first)) return null; // a unix socket path
  return { host: typeof args[1] === 'string' ? args[1] : undefined, port: first };
}

const originalConnect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guardedConnect(...args) {
  const target = connectTarget(args);
  if (target && !isLoopbackHost(target.host)) {
    const message = `${TAG} blocked a connection to ${target.host}:${target.port} (pid ${process.pid})`;
    console.error(message);
    const error = new Error(message);
    error.code = 'ECONNREFUSED';
    process.nextTick(() => this.destroy(error));
    return this;
  }
  return originalConnect.apply(this, args);
};

const originalLookup = dns.lookup;
dns.lookup = function guardedLookup(hostname, ...rest) {
  if (!isLoopbackHost(hostname) && net.isIP(String(hostname)) === 0) {
    const message = `${TAG} blocked a DNS lookup of ${hostname} (pid ${process.pid})`;
    console.error(message);
    const callback = rest[rest.length - 1];
    const error = new Error(message);
    error.code = 'ENOTFOUND';
    if (typeof callback === 'function') process.nextTick(() => callback(error));
    return {};
  }
  return originalLookup.call(this, hostname, ...rest);
};

const originalPromiseLookup = dns.promises.lookup;
dns.promises.lookup = async function guardedPromiseLookup(hostname, ...rest) {
  if (!isLoopbackHost(hostname) && net.isIP(String(hostname)) === 0) {
    const message = `${TAG} blocked a DNS lookup of ${hostname} (pid ${process.pid})`;
    console.error(message);
    const error = new Error(message);
    error.code = 'ENOTFOUND';
    throw error;
  }
  return originalPromiseLookup.call(this, hostname, ...rest);
};

const originalLoad = Module._load;
Module._load = function guardedLoad(request, parent, isMain) {
  const exported = originalLoad.apply(this, arguments);
  if (request === 'steam-webapi' && exported && !exported.__loopbackStub) {
    exported.ready = function ready(key, callback) {
      const cb = typeof key === 'function' ? key : callback;
      console.log(`${TAG} Steam Web API stubbed: no request to api.steampowered.com`);
      if (typeof cb === 'function') process.nextTick(() => cb());
    };
    exported.__loopbackStub = true;
  }
  return exported;
};
