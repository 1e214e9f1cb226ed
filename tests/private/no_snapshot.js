// Player code runs only without the driver's V8 snapshot: make it look absent, without touching the installation.
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
