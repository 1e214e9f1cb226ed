#!/usr/bin/env node
// The peer of the side-by-side benchmark (bench/bench_peer.py): deploy a folder of modules the way most
// Screeps players do with node-screeps-api (npm `screeps-api`) -- read every file, sign in, one blind
// `api.code.set(branch, modules)` -- whatever the server already holds.
//
// Usage: SCREEPS_URL=http://127.0.0.1:PORT SCREEPS_USER=... SCREEPS_PASSWORD=... node deploy.js ROOT BRANCH
//
// Module names follow gitops' defaults so that both sides upload the same map: `group00/module0000.js` is
// `group00/module0000`; a `.wasm` file is a binary module `{binary: base64}` that keeps its suffix.
// screeps-api is resolved through NODE_PATH (bench/bench_peer.py points it at .bench/peer/node_modules).
'use strict';

const { ScreepsAPI } = require('screeps-api');
const { readModules } = require('./modules');

async function main() {
  const [root, branch] = process.argv.slice(2);
  const { SCREEPS_URL: url, SCREEPS_USER: user, SCREEPS_PASSWORD: password } = process.env;
  if (!root || !branch || !url || !user || !password) {
    console.error('usage: SCREEPS_URL=... SCREEPS_USER=... SCREEPS_PASSWORD=... node deploy.js ROOT BRANCH');
    process.exit(4);
  }
  const modules = readModules(root);
  const { protocol, hostname, port } = new URL(url);
  const api = new ScreepsAPI({ protocol: protocol.replace(':', ''), hostname, port: Number(port), path: '/' });
  await api.auth(user, password);
  const answer = await api.code.set(branch, modules);
  if (!answer || answer.ok !== 1) {
    console.error(`upload refused: ${JSON.stringify(answer)}`);
    process.exit(1);
  }
  console.log(`uploaded ${Object.keys(modules).length} modules to ${branch}`);
}

main().catch((err) => {
  console.error(`deploy failed: ${err && err.message ? err.message : err}`);
  process.exit(1);
});
