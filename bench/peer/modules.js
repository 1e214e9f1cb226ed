'use strict';
// What both peers upload: every .js file as a module named by its path without the suffix (gitops' defaults:
// `group00/module0000.js` is `group00/module0000`), and every .wasm file as a binary module that keeps its suffix.

const fs = require('fs');
const path = require('path');

function readModules(root) {
  const modules = {};
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(full);
        continue;
      }
      const relative = path.relative(root, full).split(path.sep).join('/');
      if (relative.endsWith('.js')) {
        modules[relative.slice(0, -3)] = fs.readFileSync(full, 'utf8');
      } else if (relative.endsWith('.wasm')) {
        modules[relative] = { binary: fs.readFileSync(full).toString('base64') };
      }
    }
  };
  walk(root);
  return modules;
}

module.exports = { readModules };
