// A stand-in for rollup (rollup -c with rollup-plugin-typescript2), so that this example builds with node alone:
// it bundles src/ into one CommonJS file, dist/main.js, with a version 3 source map, dist/main.js.map. It handles
// only what these sources use (named imports between them, exported functions, simple type annotations).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";

const order = ["src/role/harvester.ts", "src/main.ts"]; // dependencies first, as a bundler orders them
const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function vlq(value) {
  let v = value < 0 ? (-value << 1) | 1 : value << 1;
  let out = "";
  do {
    let digit = v & 31;
    v >>>= 5;
    if (v > 0) digit |= 32;
    out += BASE64[digit];
  } while (v > 0);
  return out;
}

const lines = ['"use strict";'];
const mappings = [""];
let previous = [0, 0, 0]; // source, line, column of the last segment (the map's fields are relative)
order.forEach((file, source) => {
  readFileSync(file, "utf8").split("\n").forEach((text, line) => {
    if (/^import .* from /.test(text) || (text === "" && line > 0)) return;
    lines.push(
      text
        .replace(/^export function/, "function")
        .replace(/(\w)\s*:\s*(void|Creep|string|number|boolean)\b/g, "$1")
        .replace(/\)\s*:\s*(void|string|number|boolean)\s*\{/g, ") {"),
    );
    mappings.push(vlq(0) + vlq(source - previous[0]) + vlq(line - previous[1]) + vlq(0 - previous[2]));
    previous = [source, line, 0];
  });
});
lines.push("module.exports.loop = loop;", "//# sourceMappingURL=main.js.map");

mkdirSync("dist", { recursive: true });
writeFileSync("dist/main.js", lines.join("\n") + "\n");
const map = {
  version: 3,
  file: "main.js",
  sources: order.map((f) => "../" + f),
  sourcesContent: order.map((f) => readFileSync(f, "utf8")),
  names: [],
  mappings: mappings.join(";"),
};
writeFileSync("dist/main.js.map", JSON.stringify(map));
console.log(`built dist/main.js (${lines.length} lines) and dist/main.js.map from ${order.length} files`);
