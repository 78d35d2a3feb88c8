"""Error text as one line: what a binary prints, what a refusal quotes."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

# Lines of TF's errors that say where it happened, not what.
_WHERE = ('Graph execution error', 'Detected at node', 'Node:', '[[',
          'stack trace', 'File ', 'most recent call')


def one_line(error: Any) -> str:
  """`error` (an exception or text) with its white space folded to single
  spaces; an exception without a message gives its type's name."""
  text = ' '.join(str(error).split())
  return text or (type(error).__name__ if isinstance(error, BaseException)
                  else text)


def first_line(error: Any) -> str:
  """What a multi-line native error (TF's, the TFLite converter's) says went
  wrong: its first 'error: ...' text, else its first line that is not a
  location, else its first line (see `one_line` for none); cut to 200."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  useful = ([line.split('error: ', 1)[1] for line in lines
             if 'error: ' in line] or
            [line for line in lines if not any(w in line for w in _WHERE)] or
            lines)
  return useful[0][:200] if useful else one_line(error)


@contextlib.contextmanager
def errors_in_one_line(prefix: str, *kinds: type) -> Iterator[None]:
  """Exits with 'PREFIX: message' on one line (exit code 1) for a ValueError
  (or one of `kinds`) raised inside."""
  try:
    yield
  except (ValueError, *kinds) as e:
    sys.exit(f'{prefix}: {one_line(e)}')
