// Console helpers for test servers only: `require('dev.debug').creeps()` in the game console.
module.exports.creeps = function () {
    return _.map(Game.creeps, (c) => `${c.name} ${c.memory.role} ${c.pos}`).join('\n');
};
