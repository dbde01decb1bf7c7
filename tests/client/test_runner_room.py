"""A runner that fits its machine (issue 26 §3): the memory keys of its config, and the arithmetic of
whether another run of a provider fits (runner/room.py), with a fake meminfo and clock."""

import pytest

from switchyard_client.runner.config import RunnerConfigError, parse_config
from switchyard_client.runner.providers import MEMORY_MB, providers_for
from switchyard_client.runner.room import RESERVE_SECONDS, ROOM_MAX, Memory, RoomKeeper, meminfo_read

ENV = {"SWITCHYARD_URL": "http://127.0.0.1:8000", "SWITCHYARD_RUNNER_KEY": "sk_run_x"}


def test_memory_keys_default_and_are_read():
    config = parse_config({}, env=ENV)
    assert config.min_free_memory_mb == 1024
    offered = providers_for(config)
    assert offered["demo"].memory_mb == MEMORY_MB["demo"]

    config = parse_config(
        {
            "runner": {"min_free_memory_mb": 0},
            "providers": {"demo": {"memory_mb": 900}, "mine": {"command": ["{python}", "--", "{prompt}"]}},
        },
        env=ENV,
    )
    offered = providers_for(config)
    assert config.min_free_memory_mb == 0
    assert offered["demo"].memory_mb == 900
    # a provider of its own that does not say: the default for one
    assert offered["mine"].memory_mb == 256


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"runner": {"min_free_memory_mb": -1}}, "[runner] min_free_memory_mb: must be an integer from 0 to"),
        ({"runner": {"min_free_memory_mb": "1G"}}, "[runner] min_free_memory_mb: must be an integer"),
        ({"runner": {"min_free_memory_mb": 1.5}}, "[runner] min_free_memory_mb: must be an integer"),
        ({"runner": {"min_free_memory_mb": True}}, "[runner] min_free_memory_mb: must be an integer"),
        ({"providers": {"demo": {"memory_mb": -5}}}, "[providers.demo] memory_mb: must be an integer from 0 to"),
        ({"providers": {"demo": {"memory_mb": "2GB"}}}, "[providers.demo] memory_mb: must be an integer"),
        ({"providers": {"demo": {"memory_mb": 1 << 30}}}, "[providers.demo] memory_mb: must be an integer from 0 to"),
    ],
)
def test_bad_memory_keys_are_refused_naming_the_key(data, message):
    with pytest.raises(RunnerConfigError) as caught:
        parse_config(data, env=ENV)
    assert message in str(caught.value)


def test_meminfo_is_read_in_mb_and_a_broken_file_is_unknown(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text("MemTotal:        4096000 kB\nMemFree:   100 kB\nMemAvailable:    2048000 kB\n")
    assert meminfo_read(str(path)) == Memory(available_mb=2000, total_mb=4000)
    path.write_text("MemTotal: 4096000 kB\n")
    assert meminfo_read(str(path)) is None
    assert meminfo_read(str(tmp_path / "missing")) is None


class Machine:
    def __init__(self, available: int, total: int = 8000):
        self.available, self.total, self.now = available, total, 1000.0

    def meminfo(self):
        return Memory(available_mb=self.available, total_mb=self.total)

    def clock(self):
        return self.now


def keeper(machine: Machine, *, min_free: int = 1000, **needs) -> RoomKeeper:
    return RoomKeeper(min_free_mb=min_free, needs_mb=needs, meminfo=machine.meminfo, clock=machine.clock)


def test_room_is_what_is_available_beyond_min_free_over_each_need():
    machine = Machine(available=3000)
    room = keeper(machine, claude=512, demo=64, free=0).look()
    # 3000 - 1000 = 2000 MB to spare: 3 claude runs, 31 demo runs, and a provider that takes nothing always
    assert room.room == {"claude": 3, "demo": 31, "free": ROOM_MAX}
    assert room.short() == []
    assert room.report() == {
        "available_mb": 3000,
        "total_mb": 8000,
        "min_free_mb": 1000,
        "reserved_mb": 0,
        "needs_mb": {"claude": 512, "demo": 64, "free": 0},
    }


def test_below_min_free_nothing_fits_but_what_takes_nothing():
    machine = Machine(available=900)
    room = keeper(machine, claude=512, free=0).look()
    assert room.room == {"claude": 0, "free": ROOM_MAX}
    assert room.short() == ["claude"]


def test_runs_just_started_are_reserved_until_the_machine_shows_them():
    machine = Machine(available=2100)
    rooms = keeper(machine, claude=512)
    assert rooms.look().room == {"claude": 2}

    # a run starts: MemAvailable does not show it yet, its reservation does
    rooms.reserve(7, "claude")
    assert rooms.look().room == {"claude": 1}
    assert rooms.look().reserved_mb == 512
    rooms.reserve(8, "claude")
    assert rooms.look().room == {"claude": 0}

    # later the machine shows their memory, and the reservations have lapsed
    machine.available = 2100 - 2 * 512
    machine.now += RESERVE_SECONDS
    assert rooms.look().reserved_mb == 0
    assert rooms.look().room == {"claude": 0}

    # one ends: its memory is free again
    machine.available += 512
    assert rooms.look().room == {"claude": 1}


def test_a_run_that_ends_at_once_releases_its_reservation():
    machine = Machine(available=1600)
    rooms = keeper(machine, claude=512)
    rooms.reserve(7, "claude")
    assert rooms.look().room == {"claude": 0}
    rooms.release(7)
    assert rooms.look().room == {"claude": 1}


def test_unknown_memory_says_nothing():
    rooms = RoomKeeper(min_free_mb=1000, needs_mb={"claude": 512}, meminfo=lambda: None)
    assert rooms.look() is None
