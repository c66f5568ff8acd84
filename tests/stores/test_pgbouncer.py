"""PostgresStore behind a real PgBouncer in transaction mode, when one is installed (issue 42, deliver item 4).

The pooler is started here on a free port of 127.0.0.1, in front of the test
server: `pool_mode = transaction`, three server connections, and
`server_reset_query_always = 1` with `DISCARD ALL`, so every transaction finds
a server connection with no session state of the one before. The store opens
(and migrates) through it and runs the core's whole cycle. With
`?prepare=false` that works; with prepared statements (the default) it fails,
saying so: PgBouncer before 1.21 carries no prepared statement from one
server connection to another (this test says which version it ran).
tests/stores/test_postgres_binding.py simulates the same pooler without the
binary, and runs everywhere a server does.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from urllib.parse import urlsplit

import pytest

from shiftchange.core import StoreError
from tests.stores.test_postgres_binding import cycle_every_task

pytestmark = pytest.mark.heavy

START_TIMEOUT_S = 10.0


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or next((path for path in ("/usr/sbin/pgbouncer",) if os.access(path, os.X_OK)), None)


@pytest.fixture
def pgbouncer_url(postgres_url, tmp_path):
    """A URL of the test database through a PgBouncer in transaction mode, started for the test and stopped after it."""
    binary = pgbouncer_binary()
    if binary is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer): tests/stores/test_postgres_binding.py simulates it")
    server = urlsplit(postgres_url)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.hostname} port={server.port or 5432} user={server.username or 'postgres'}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        "auth_type = any\npool_mode = transaction\ndefault_pool_size = 3\nmin_pool_size = 3\nmax_client_conn = 20\n"
        "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1\n"  # no logfile, no pidfile: it logs on stderr
    )
    # It reads its configuration first; started as root (as CI is), it then runs as `nobody`, as it insists.
    command = [binary, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(tmp_path / "pgbouncer.ini")]
    log = tmp_path / "pgbouncer.log"
    with log.open("wb") as sink:  # its stderr, opened here: the pooler itself may not write under a root-only tmp_path
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"pgbouncer did not start: {log.read_text(errors='replace')[-500:]}")
            time.sleep(0.05)
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
        yield f"postgresql://{server.username or 'postgres'}@127.0.0.1:{port}{server.path}", version
    finally:
        process.terminate()
        process.wait(10)


def test_behind_pgbouncer_in_transaction_mode_the_store_works_unprepared(make_postgres_store, pgbouncer_url):
    url, version = pgbouncer_url
    store = make_postgres_store(conninfo=url, prepare=False, pool_max=2)
    finished = cycle_every_task(store, 12)
    assert len(finished) == 12
    events = store.events()
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    print(f"ran behind {version}")
    store.close()


def test_behind_pgbouncer_before_1_21_prepared_statements_fail_and_say_so(make_postgres_store, pgbouncer_url):
    url, version = pgbouncer_url
    (major, minor) = (int(part) for part in version.split()[-1].split(".")[:2])
    if (major, minor) >= (1, 21):
        pytest.skip(f"{version} carries protocol-level prepared statements (max_prepared_statements): nothing to show failing")
    store = make_postgres_store(conninfo=url, pool_max=2)
    with pytest.raises(StoreError, match=r'prepared statement "shiftchange_\w+" does not exist'):
        cycle_every_task(store, 12)
    store.close()
