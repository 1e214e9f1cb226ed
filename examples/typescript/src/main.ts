import { runHarvester } from "./role/harvester";

export function loop(): void {
  for (const name in Game.creeps) {
    runHarvester(Game.creeps[name]);
  }
}
