'use strict';
// The throwaway world of `gitops rehearse` (gitops/edges/privateserver.py starts it: `node rehearsal-world.js` in the
// world's folder, NODE_PATH naming the install's node_modules). The same server as `screeps start` in fewer
// processes: this one holds the storage (the world's database, @screeps/storage, as its own process does) and the
// admin CLI (@screeps/backend's CLI server and sandbox, as the backend holds them), and starts the engine's main loop,
// one runner and one processor as the launcher does. Left out, as a rehearsal needs none of them: the launcher, the
// backend's game server (HTTP API and socket: nobody signs in; this world's bots are seeded through the CLI and their
// console and cpu messages recorded by rehearsal-recorder.js here), its cron jobs, and screepsmod-auth. Two node
// processes fewer to start and to feed every tick: issue 48's benchmark (bench/README.md).
//
// Environment: CLI_HOST, CLI_PORT (the admin CLI, loopback), MODFILE (mods.json), DB_PATH (db.json); the storage
// listens on a unix socket in this folder. A process of the world that exits ends the world (no restart: a rehearsal
// that lost its engine is unknown, not retried in place); SIGTERM ends it with its children.
const cp = require('child_process');
const fs = require('fs');
const path = require('path');
const { EventEmitter } = require('events');

const common = require('@screeps/common');

const STORAGE_SOCKET = 'storage.sock';
const children = [];
let ending = false;

function end(code, why) {
  if (ending) return;
  ending = true;
  if (why) console.error(why);
  for (const child of children) child.kill('SIGKILL');
  process.exit(code);
}

function start(name, script, env, flags) {
  const log = fs.openSync(path.join('logs', `${name}.log`), 'a');
  const child = cp.spawn(process.execPath, [...flags, script], {
    stdio: ['ignore', log, log],
    env: Object.assign({}, process.env, env),
  });
  fs.closeSync(log);
  child.on('exit', (code, signal) => end(1, `[${name}] exited (code ${code}, signal ${signal}): the world ends`));
  children.push(child);
}

function storageListening() {
  // The storage tells a launcher it listens with process.send('storageLaunched'); here it runs in this process.
  return new Promise((resolve) => {
    process.send = (message) => {
      if (message === 'storageLaunched') resolve();
      return true;
    };
  });
}

async function main() {
  for (const name of ['CLI_HOST', 'CLI_PORT', 'MODFILE', 'DB_PATH']) {
    if (!process.env[name]) end(2, `${name} is not set`);
  }
  try {
    fs.unlinkSync(STORAGE_SOCKET);
  } catch (e) {}
  process.env.STORAGE_PORT = STORAGE_SOCKET;
  // As @screeps/backend's lib/index.js: the events its CLI and the mods (the recorder) hook into.
  Object.assign(common.configManager.config, { backend: new EventEmitter(), cli: new EventEmitter() });
  const listening = storageListening();
  require('@screeps/storage/lib/index').start(); // loads the mods (once, for this process) and the database
  await listening;
  const engine = path.dirname(require.resolve('@screeps/engine'));
  const shared = { STORAGE_PORT: STORAGE_SOCKET, DRIVER_MODULE: '@screeps/driver' };
  // Only the runner makes isolates (isolated-vm, which on Node.js 20 needs --no-node-snapshot); the others start
  // from node's startup snapshot, each some 50 ms of CPU sooner (issue 48's benchmark, bench/README.md).
  const runner = Object.assign({ RUNNER_THREADS: '1' }, shared);
  start('engine_runner1', path.join(engine, 'runner.js'), runner, ['--no-node-snapshot']);
  start('engine_processor1', path.join(engine, 'processor.js'), shared, []);
  await common.storage._connect();
  const cli = require('@screeps/backend/lib/cli/server').startServer();
  cli.on('error', (error) => end(1, `the admin CLI could not listen: ${error.code || error}`));
  // The engine's main loop here too (one node process fewer to start): it only sends the others work through the
  // storage and waits. The mods are loaded already (the storage loaded them): its driver must not load them again.
  common.configManager.load = () => {};
  process.env.DRIVER_MODULE = '@screeps/driver';
  require(path.join(engine, 'main.js'));
}

process.on('SIGTERM', () => end(0));
process.on('SIGINT', () => end(0));
main().catch((error) => end(1, String((error && error.stack) || error)));
