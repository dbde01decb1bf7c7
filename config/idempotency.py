"""Client ids make retries safe: the same id and body returns the stored row (200);
the same id with another body is a conflict (409)."""

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


def canonical_sha256(value: Any) -> str:
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


@dataclass
class ItemResult:
    """The outcome for one item of a write, single or batched."""

    index: int
    status: int  # 201 stored, 200 replay of a stored item, 400/409/413 refused
    obj: Any = None
    errors: Any = None
    message: str = ""


@dataclass
class IncomingItem:
    index: int
    data: dict  # validated
    body_sha256: str  # of the raw item as sent
    client_id: str | None = field(default=None)


def resolve_replays(
    *, existing: dict[str, Any], items: list[IncomingItem]
) -> tuple[list[IncomingItem], list[ItemResult]]:
    """Split items into new ones and the results for replays and conflicts.

    ``existing`` maps client id to stored rows (with ``body_sha256``). A client id seen
    twice in one batch counts as a replay of its first occurrence.
    """
    fresh: list[IncomingItem] = []
    results: list[ItemResult] = []
    seen_in_batch: dict[str, IncomingItem] = {}
    for item in items:
        cid = item.client_id
        if cid is not None and cid in existing:
            stored = existing[cid]
            if stored.body_sha256 == item.body_sha256:
                results.append(ItemResult(index=item.index, status=200, obj=stored))
            else:
                results.append(_conflict(item))
        elif cid is not None and cid in seen_in_batch:
            first = seen_in_batch[cid]
            if first.body_sha256 == item.body_sha256:
                results.append(ItemResult(index=item.index, status=200, obj=("same_as", first.index)))
            else:
                results.append(_conflict(item))
        else:
            if cid is not None:
                seen_in_batch[cid] = item
            fresh.append(item)
    return fresh, results


def _conflict(item: IncomingItem) -> ItemResult:
    return ItemResult(
        index=item.index,
        status=409,
        message=f"Client id {item.client_id!r} was already used with a different body.",
    )
