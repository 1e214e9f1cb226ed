// Entry point: run every creep by its role.
const roles = {
    harvester: require('role.harvester'),
    upgrader: require('role.upgrader'),
};

module.exports.loop = function () {
    for (const name in Game.creeps) {
        const creep = Game.creeps[name];
        const role = roles[creep.memory.role];
        if (role) {
            role.run(creep);
        }
    }
    if (Game.spawns.Spawn1 && _.size(Game.creeps) < 4) {
        const role = _.size(Game.creeps) % 2 === 0 ? 'harvester' : 'upgrader';
        Game.spawns.Spawn1.spawnCreep([WORK, CARRY, MOVE], `${role}-${Game.time}`, { memory: { role } });
    }
};
