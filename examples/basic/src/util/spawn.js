// Spawn the first role that has fewer creeps than wanted, with a body the room can afford.
const BASIC_BODY = [WORK, CARRY, MOVE];

function bodyFor(energy) {
    const body = [];
    const unit = BASIC_BODY.reduce((sum, part) => sum + BODYPART_COST[part], 0);
    for (let n = 0; n < Math.max(1, Math.floor(energy / unit)) && body.length + 3 <= MAX_CREEP_SIZE; n++) {
        body.push(...BASIC_BODY);
    }
    return body;
}

module.exports.keepPopulation = function (spawn, wanted) {
    if (spawn.spawning) {
        return;
    }
    for (const role in wanted) {
        const count = _.filter(Game.creeps, (c) => c.memory.role === role).length;
        if (count < wanted[role]) {
            const name = `${role}-${Game.time}`;
            spawn.spawnCreep(bodyFor(spawn.room.energyAvailable), name, { memory: { role } });
            return;
        }
    }
};
