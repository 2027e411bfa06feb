"""The teacher's session as last published, kept in this process, for the class to share.

A student following the teacher used to replay the teacher's new tokens in a session of their
own: thirty students, thirty passes per teacher step and thirty copies of the same cache. Now,
when the teacher's view is published, a fork of the teacher's session (``GenerationSession.fork``)
is kept here under the workshop's code; a student catching up takes a fork of that fork: no pass,
and the same blocks of the model's stores until someone writes (a student stepping on their own,
or the teacher's next step, copies one block).

This is an in-process shortcut: behind several replicas a student served by another process
than the teacher's finds nothing here and replays, as before. A session that cannot be forked
(under a cache policy) or that a student could not take as it is (interventions) is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from explorer.analysis import snapshot
from explorer.session import GenerationSession

MOST_KEPT = 64  # workshops whose teacher's session is kept (the oldest goes first)
SETTINGS = ("model", "text", "chat", "use_cache", "temperature", "top_k", "top_p", "seed", "cache_policy")

_kept: OrderedDict[str, tuple[GenerationSession, snapshot.Snapshot]] = OrderedDict()
_lock = threading.Lock()


def publish(code: str, model: str, session: GenerationSession) -> None:
    """Keep a fork of the teacher's ``session`` (of public model name ``model``) for workshop ``code``."""
    if not session.can_fork or session.interventions:
        forget(code)
        return
    fork = session.fork()
    with _lock:
        _kept[code] = (fork, snapshot.snapshot_of(model, fork))
        _kept.move_to_end(code)
        while len(_kept) > MOST_KEPT:
            _kept.popitem(last=False)


def fork_for(code: str, snap: snapshot.Snapshot) -> GenerationSession | None:
    """A fork of the teacher's kept session when it holds exactly ``snap``'s text, settings and
    tokens; None otherwise (the student's own session catches up by replaying)."""
    with _lock:
        kept = _kept.get(code)
    if kept is None:
        return None
    session, published = kept
    same = all(getattr(published, name) == getattr(snap, name) for name in SETTINGS)
    if not same or published.generated != snap.generated or sorted(published.forced) != sorted(snap.forced):
        return None
    return session.fork()


def forget(code: str) -> None:
    """The workshop ended (or its teacher's session cannot be shared): its session goes."""
    with _lock:
        _kept.pop(code, None)
