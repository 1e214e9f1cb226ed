#!/usr/bin/env node
// The peer of the network benchmark (bench/bench_network.py): deploy a folder of modules with node-screeps-api's
// token mode, as players deploy to the official server -- read every file, one blind `api.code.set(branch,
// modules)` with the token, whatever the server already holds.
//
// Usage: SCREEPS_URL=http://127.0.0.1:PORT SCREEPS_TOKEN=... node deploy_token.js ROOT BRANCH
// Module names as in deploy.js (gitops' defaults). screeps-api is resolved through NODE_PATH.
'use strict';

const { ScreepsAPI } = require('screeps-api');
const { readModules } = require('./modules');

async function main() {
  const [root, branch] = process.argv.slice(2);
  const { SCREEPS_URL: url, SCREEPS_TOKEN: token } = process.env;
  if (!root || !branch || !url || !token) {
    console.error('usage: SCREEPS_URL=... SCREEPS_TOKEN=... node deploy_token.js ROOT BRANCH');
    process.exit(4);
  }
  const modules = readModules(root);
  const { protocol, hostname, port } = new URL(url);
  const api = new ScreepsAPI({ token, protocol: protocol.replace(':', ''), hostname, port: Number(port), path: '/' });
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
