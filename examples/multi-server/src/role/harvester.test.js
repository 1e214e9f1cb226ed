// Run outside the game (node src/role/harvester.test.js); excluded from every branch by '**/*.test.js'.
const assert = require('assert');
assert.strictEqual(typeof require('./harvester').run, 'function');
