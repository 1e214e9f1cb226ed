'use strict';
// The loader of a Rust bot: require('mybot_bg') returns the bytes of the binary module mybot_bg (pkg/mybot_bg.wasm),
// compiled once per global. screeps-starter-rust's loader also wires up the wasm-bindgen glue; this one needs none.
let bot = null;

module.exports.loop = function () {
    if (bot === null) {
        const bytes = require('mybot_bg');
        bot = new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports;
    }
    Memory.wasmCheck = bot.add(20, 22);
};
