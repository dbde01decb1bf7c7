"""`switchyard runner`: a daemon that asks Switchyard for runs, starts their agents, ships their logs and
reports how they ended. command.py (its options) starts loop.py's Runner (heartbeat, long poll,
recovery), which gives each run a thread (worker.py) and the idle ones to one Watcher (watcher.py);
config.py, providers.py, process.py, logship.py, state.py, repos.py and git.py are what they stand on."""
