export function runHarvester(creep: Creep): void {
  const source = creep.pos.findClosestByPath(FIND_SOURCES);
  if (source && creep.harvest(source) === ERR_NOT_IN_RANGE) {
    creep.moveTo(source);
  }
}
