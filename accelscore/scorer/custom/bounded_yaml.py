"""YAML for user-supplied files, bounded: no aliases, limited nesting and node count (issue 21).

A 583-byte alias bomb ("billion laughs") expands to gigabytes once constructed, and formatting it in an
error message wrote a 39 MB log line. Plain `yaml.safe_load` follows aliases; this loader refuses them
at the first one (a custom-scores file never needs them), refuses nesting deeper than `MAX_DEPTH` and more
than `MAX_NODES` nodes, all while composing (before anything is constructed). Error messages name the line
and never quote the document. The file size is bounded by the caller.
"""

from __future__ import annotations

import yaml
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import Node

__all__ = ["MAX_DEPTH", "MAX_NODES", "load"]

MAX_DEPTH = 16  # a scores file is four levels deep (scores, item, promql, query)
MAX_NODES = 100_000  # ~ the number of scalars in a file of the largest allowed size


class _Refused(yaml.YAMLError):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and bounds depth and node count while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            mark = self.peek_event().start_mark
            raise _Refused(f"line {mark.line + 1}: aliases (*name) are not accepted")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} YAML nodes")
        nests = self.check_event(SequenceStartEvent, MappingStartEvent)
        if nests:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(f"line {mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            if nests:
                self._depth -= 1


def load(text: str) -> object:
    """The one document in `text`; ValueError with a one-line reason when it is not YAML or breaks a bound."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except _Refused as err:
        raise ValueError(str(err)) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ValueError(f"not valid YAML: {where}{(err.problem or err.context or 'syntax error')[:120]}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"not valid YAML: {str(err).splitlines()[0][:120] if str(err) else 'syntax error'}") \
            from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
