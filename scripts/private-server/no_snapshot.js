'use strict';
// Preloaded into every process of the private server (NODE_OPTIONS=--require ...) by scripts/private-server.sh, by
// `gitops rehearse` and by the test suite, so that the server runs player code.
//
// The driver's V8 snapshot (@screeps/driver/build/runtime.snapshot.bin) is broken with the isolated-vm that builds on
// Node.js 20: with it, every tick of every player fails with `ReferenceError: _ is not defined` at `<runtime>`. Without
// it, the driver builds each player's runtime from its bundle instead (a little slower on the first tick). This
// preload makes that one file look absent, without touching the installation (which several servers may share).
const fs = require('fs');
const readFileSync = fs.readFileSync;
fs.readFileSync = function (path, ...rest) {
  if (typeof path === 'string' && path.endsWith('runtime.snapshot.bin')) {
    const error = new Error(`ENOENT: no such file or directory, open '${path}'`);
    error.code = 'ENOENT';
    throw error;
  }
  return readFileSync.call(this, path, ...rest);
};
