"""A rating annotator as a separate process (used by test_db_concurrency).

usage: rating_worker.py DATABASE_URL ANNOTATOR COLLECTION N K GO_FILE
Touches GO_FILE.ready.ANNOTATOR once started, waits for GO_FILE, then takes N items from the rating queue, rating each in its own
transaction, and prints {"ratings": [[rating_id, caption_id], ...], "seconds": ...}.
"""
import json
import sys
import time
from pathlib import Path

from annotation import workflows as wf
from db.session import get_engine, session_scope
from db.users import get_user


def main() -> None:
    url, name, collection_name, n, k, go_file = sys.argv[1:7]
    engine = get_engine(url)
    with session_scope(engine, read_only=True) as session:
        user = get_user(session, name)
    Path(f"{go_file}.ready.{name}").touch()
    while not Path(go_file).exists():
        time.sleep(0.01)
    started = time.perf_counter()
    done = []
    for index in range(int(n)):
        with session_scope(engine) as session:
            collection = wf.get_collection(session, collection_name)
            item = wf.next_rating_item(session, user, collection, k=int(k))
            if item is None:
                break
            rating = wf.submit_rating(session, user, item.id, overall=(index % 11) / 10)
            done.append([rating.id, item.id])
    print(json.dumps({"ratings": done, "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
