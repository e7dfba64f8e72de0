"""Brokers the bridge tests run against: RabbitMQ and Redis when they answer on this
machine, and always kombu's filesystem transport, which needs no server."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672//"
REDIS_URL = "redis://127.0.0.1:6379/15"
BROKERS = ("rabbitmq", "redis", "filesystem")


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def broker_conf(kind: str, tmp: Path) -> dict[str, Any] | None:
    """Celery settings for the broker, or None when it is not reachable here."""
    if kind == "rabbitmq":
        return {"broker_url": RABBITMQ_URL} if answers(5672) else None
    if kind == "redis":
        return {"broker_url": REDIS_URL} if answers(6379) else None
    folder = tmp / "broker"
    folder.mkdir(parents=True, exist_ok=True)
    return {"broker_url": "filesystem://",
            "broker_transport_options": {"data_folder_in": str(folder),
                                         "data_folder_out": str(folder),
                                         "control_folder": str(folder / "control")}}
