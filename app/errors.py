"""Every event handler of the app behind one guard, so what escapes a handler reaches the
user as `annotation.errors.user_message` words it: a message written for users (server
paths reduced to names), or "Something went wrong (error id …)" with the traceback in the
log under that id. Raw exception text (SQL, paths) never reaches the browser or an API
client, and the console gets no traceback for an error that is the user's (a wrong
password)."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import gradio as gr

from annotation.errors import public_text, user_message


def as_gradio_error(exc: Exception) -> gr.Error:
    """The `gr.Error` a user sees for `exc` (a `gr.Error` of ours keeps its words)."""
    if isinstance(exc, gr.Error):
        exc.message = public_text(str(exc.message))
        exc.print_exception = False
        return exc
    return gr.Error(user_message(exc), print_exception=False)


def guarded(fn: Callable) -> Callable:
    """`fn` (plain, generator, coroutine or async generator, as Gradio calls them) raising
    only `as_gradio_error`'s errors; its signature stays visible to Gradio."""
    if inspect.isasyncgenfunction(fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                async for item in fn(*args, **kwargs):
                    yield item
            except Exception as exc:
                raise as_gradio_error(exc) from None
    elif inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                raise as_gradio_error(exc) from None
    elif inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:
                raise as_gradio_error(exc) from None
    else:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                raise as_gradio_error(exc) from None
    wrapper.caplens_guarded = True
    return wrapper


def guard_events(demo: gr.Blocks) -> gr.Blocks:
    """Put every Python event handler of `demo` behind `guarded` (once the layout is built)."""
    for block_fn in demo.fns.values():
        if block_fn.fn is not None and not getattr(block_fn.fn, "caplens_guarded", False):
            block_fn.fn = guarded(block_fn.fn)
    return demo


def refused_in_status(fn: Callable, before: int, after: int = 0) -> Callable:
    """A queue handler whose refused request (no right, no such item) leaves the screen as it
    is and says why in the status output (`before` outputs precede it, `after` follow it)."""
    @functools.wraps(fn)  # Gradio reads the signature to pass the gr.Request
    def wrapper(*args):
        try:
            return fn(*args)
        except (PermissionError, ValueError, LookupError) as exc:
            return (*[gr.skip()] * before, user_message(exc), *[gr.skip()] * after)
    return wrapper
