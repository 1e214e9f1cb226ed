// The anchor of bench/ab_rehearse_anchor.py: the community's test harness, npm screeps-server-mockup, running a bot's
// ticks the way its README shows (start, reset the world, one room with a controller and two sources, the bot's
// spawn, server.tick() in a loop). Usage: node --require no_snapshot.js anchor_mockup.js MODULES.json TICKS
// (MODULES.json: {"main": "...", ...}, the built bot). The preload is the rehearsal's own (scripts/private-server/):
// the harness forks its runner and processor with node's execArgv, and without it the engine's broken V8 snapshot
// fails every player's runtime at its start ("ReferenceError: _ is not defined"), so no bot code would run.
// It prints one JSON line: {"ticks": N, "game_ticks": G, "ran_ticks": R, "failed_ticks": F, "log_ticks": L,
// "first_error": E, "memory": bytes, "ms": {..}}. Written for the benchmark (not the harness's own code); NODE_PATH
// names the folder the harness is installed in.
"use strict";
const fs = require("fs");
const { ScreepsServer, TerrainMatrix } = require("screeps-server-mockup");

async function main() {
  const [modulesFile, ticksText] = process.argv.slice(2);
  const modules = JSON.parse(fs.readFileSync(modulesFile, "utf8"));
  const ticks = Number(ticksText);
  const began = Date.now();
  const server = new ScreepsServer();
  await server.start(); // as its README: connect to the storage and start the runner and the processor first
  await server.world.reset();
  const terrain = new TerrainMatrix();
  await server.world.addRoom("W0N1");
  await server.world.setTerrain("W0N1", terrain);
  await server.world.addRoomObject("W0N1", "controller", 10, 10, { level: 0 });
  await server.world.addRoomObject("W0N1", "source", 10, 40, { energy: 1500, energyCapacity: 1500, ticksToRegeneration: 300 });
  await server.world.addRoomObject("W0N1", "source", 40, 10, { energy: 1500, energyCapacity: 1500, ticksToRegeneration: 300 });
  const bot = await server.world.addBot({ username: "bot", room: "W0N1", x: 25, y: 25, modules });
  // Whether the bot's code ran each tick: the runner publishes one console message a tick a player's code ran
  // ({messages: {log, results}}), or one with an error when its runtime failed (the harness's own "console" event
  // tells the two apart only by an empty log, so this reads the channel itself).
  let ranTicks = 0, failedTicks = 0, logTicks = 0, firstError = null;
  await server.common.storage.pubsub.subscribe(`user:${bot.id}/console`, (event) => {
    const message = JSON.parse(event);
    if (message.messages) ranTicks += 1;
    if (message.messages && message.messages.log && message.messages.log.length) logTicks += 1;
    if (message.error) { failedTicks += 1; firstError = firstError || String(message.error).split("\n")[0]; }
  });
  const first = await server.world.gameTime;
  const started = Date.now();
  for (let i = 0; i < ticks; i++) await server.tick();
  const done = Date.now();
  const gameTicks = (await server.world.gameTime) - first;
  const memory = String(await bot.memory);
  server.stop();
  process.stdout.write(JSON.stringify({ ticks, game_ticks: gameTicks, ran_ticks: ranTicks, failed_ticks: failedTicks, log_ticks: logTicks, first_error: firstError, memory: memory.length, ms: { start: started - began, ticks: done - started } }) + "\n");
  process.exit(0); // the harness's README: there is no other way to close its storage
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + "\n"); process.exit(1); });
