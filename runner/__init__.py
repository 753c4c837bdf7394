"""The runner package: the one owner of every process Pitwall starts, watches or stops.

    procs.py        the process-group helper every start and stop goes through
    loop.py         Runner: the scheduler loop, collectors' polls, shutdown order
    lease.py        one runner per host (host lease) and one housekeeper per database (db lease),
                    with generations that fence every action
    fleet.py        runner_lost / runner_back: the housekeeper watches the other hosts' runners
    self_metrics.py the runner's own health samples (source self:<runner.host>)
    writer.py       the batched writer (samples, events and collector state in one transaction)
    intents.py      intent lanes (control / probe / check / tune), claims, expiry
    supervisor.py   watches managed servers: exits, auto-restart budget, adoption, auto-start
    lifecycle.py    start / stop / relaunch with rollback of one managed server
    launch_plan.py  what the supervisor starts, as data, and readers of a launch's log
    sweeps.py       the probe lane: one sweep process per sweep (sweep_child.py is that process)
    validation.py   the check lane: profile validation with the engine's own parser
    up.py           `pitwall up` (runner + Streamlit) and the detached runner of `streamlit run`

Nothing outside this package calls subprocess, os.kill or os.killpg (the simulator, tests,
bench/ and scripts/ aside); a meta-test enforces it. The runner imports collectors and storage,
never dashboard: what to launch (profiles, validation) is injected by cli/wiring.py.
"""
