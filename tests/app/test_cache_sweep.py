"""The periodic sweep of session copies keeps running after a sweep that failed."""
import atexit
import threading


def test_a_failed_sweep_does_not_end_the_sweeping(monkeypatch):
    import app.serve as serve
    import app.ui as ui

    calls, third = [], threading.Event()

    def flaky(age):
        calls.append(age)
        if len(calls) == 1:
            raise FileNotFoundError("a folder went away during the walk")
        if len(calls) == 3:
            third.set()
        return 0

    monkeypatch.setattr(serve, "sweep_own_files", flaky)
    monkeypatch.setattr(ui, "CACHE_SWEEP", (0.01, 900))
    monkeypatch.setattr(atexit, "register", lambda *a, **k: None)
    stop = threading.Event()
    thread = serve.start_sweeping(stop)
    try:
        assert third.wait(10), calls
        assert thread.is_alive() and calls[:3] == [900, 900, 900]
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
