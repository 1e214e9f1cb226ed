"""``gitops/edges/worldseed.py``: a copied colony written into a throwaway world of the real npm private server
through its admin CLI, as data (JSON), never as code: read back from the world's storage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gitops.core.colony import Colony, RoomCopy
from gitops.edges.privateserver import running_world
from gitops.edges.worldseed import plant_colony

pytestmark = pytest.mark.private_server

ROOT = Path(__file__).resolve().parents[2]
INSTALL = Path(os.environ.get("PRIVATE_SERVER_DIR", ROOT / ".private-server"))

#: A hostile name in Memory: were the data spliced into the script as code, this would end the string and run.
HOSTILE = "'); process.exit(1); ('\"\\u2028"


def test_a_colony_is_planted_as_data_in_the_bots_room() -> None:
    if not (INSTALL / "node_modules").is_dir():
        pytest.fail(f"the private server is not installed at {INSTALL}: bash scripts/private-server.sh install")
    terrain = "0" * 2500
    spawn = {"_id": "srv-spawn", "type": "spawn", "x": 20, "y": 20, "user": "owner", "name": "Home"}
    colony = Colony(
        server="live",
        user_id="owner",
        rooms=(RoomCopy("W7N3", terrain, (spawn,)),),
        memory=json.dumps({"mark": HOSTILE, "home": "W7N3"}),
    )
    with running_world(INSTALL, dict(os.environ)) as world:
        bot = world.seed({"main": "module.exports.loop = () => {};"})
        rooms = plant_colony(world, bot, colony, "t1")
        assert rooms == [bot.room]
        spawns = f"storage.db['rooms.objects'].find({{room: '{bot.room}', type: 'spawn'}})"
        objects = world.cli(spawns + ".then(o => o.map(x => [x.user, x.name]))")
        assert objects == [[bot.user_id, "Home"]]
        memory = world.cli(f"storage.env.get(storage.env.keys.MEMORY + '{bot.user_id}')")
        assert isinstance(memory, str)
        # The text arrived as it was (and nothing of it ran); the room's name is the world's now.
        assert json.loads(memory) == {"mark": HOSTILE, "home": bot.room}
