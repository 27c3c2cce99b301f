"""The two tools both agent loop examples give their model, behind one strictcall Gateway."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from strictcall import Gateway, ToolContext, tool


class Task(TypedDict):
    task_id: str
    title: str
    priority: Literal["low", "high"]


TASKS: dict[str, list[Task]] = {}


@tool()
def count_tasks(ctx: ToolContext) -> int:
    """How many tasks the user has (0 when none)."""
    return len(TASKS.get(ctx.identity, []))


@tool()
def add_task(ctx: ToolContext, title: str, priority: Literal["low", "high"]) -> Task:
    """Add a task for the user."""
    tasks = TASKS.setdefault(ctx.identity, [])
    task: Task = {"task_id": f"t{len(tasks) + 1}", "title": title, "priority": priority}
    tasks.append(task)
    return task


def task_gateway() -> Gateway:
    """A fresh gateway over the two tools, with no tasks yet."""
    TASKS.clear()
    return Gateway([count_tasks, add_task])
