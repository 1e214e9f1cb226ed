'use strict';
// A server mod used by `gitops rehearse` (listed in the throwaway world's mods.json): in the process that holds the
// admin CLI (rehearsal-world.js), it appends every console and cpu message that the game publishes for a player to
// the file named by GITOPS_REHEARSAL_RECORD, one JSON line each: {"user": ID, "channel": "console"|"cpu", "data":
// "<the message>"}. These are the messages the game's socket would deliver (user:ID/console, user:ID/cpu), read where
// they are published, so none is throttled or lost to a connection, and no sign-in is needed.
// It also gives the admin CLI `gitopsRehearsal`, with GITOPS_REHEARSAL_ID: the tool asks it before it uses the port,
// so that another server that took the port meanwhile is never seeded.
const fs = require('fs');

module.exports = function rehearsalRecorder(config) {
  const out = process.env.GITOPS_REHEARSAL_RECORD;
  if (!out || !config.cli) return; // only the process with the admin CLI records, once
  const id = process.env.GITOPS_REHEARSAL_ID || '';
  config.cli.on('cliSandbox', (sandbox) => {
    sandbox.gitopsRehearsal = id;
  });
  const common = require.main.require('@screeps/common');
  const timer = setInterval(() => {
    if (!common.storage._connected) return;
    clearInterval(timer);
    common.storage.pubsub.subscribe('*', function record(data) {
      const match = /^user:([^/]+)\/(console|cpu)$/.exec(this.channel);
      if (match) {
        fs.appendFileSync(out, JSON.stringify({ user: match[1], channel: match[2], data }) + '\n');
      }
    });
  }, 50);
};
