// A small bot: harvesters keep the spawn filled, upgraders feed the room controller.
const roleHarvester = require('role/harvester');
const roleUpgrader = require('role/upgrader');
const spawning = require('util/spawn');
const wasm = require('util/wasm');

const WANTED = { harvester: 2, upgrader: 2 };

module.exports.loop = function () {
    for (const name in Memory.creeps) {
        if (!(name in Game.creeps)) {
            delete Memory.creeps[name];
        }
    }

    for (const spawnName in Game.spawns) {
        spawning.keepPopulation(Game.spawns[spawnName], WANTED);
    }

    for (const name in Game.creeps) {
        const creep = Game.creeps[name];
        if (creep.memory.role === 'harvester') {
            roleHarvester.run(creep);
        } else if (creep.memory.role === 'upgrader') {
            roleUpgrader.run(creep);
        }
    }

    if (Game.time % 100 === 0) {
        console.log(`tick ${Game.time}: ${Object.keys(Game.creeps).length} creeps (wasm says 2 + 3 = ${wasm.add(2, 3)})`);
    }
};
