"""SimAI's text (aliyun/SimAI master, as AICB writes it), and its JSON. A layout's plan is
written as AICB writes it (plan/simai.py: its pipeline header, a copy per micro-batch); a
keyword's as ASTRA-sim 1.0's text with SimAI's sizes and keyed header. SimAI refuses selective
recomputation, the schedules it does not run and context parallelism (plan/simai.refusal)."""

from __future__ import annotations

import dataclasses

from modtrans.formats import text, workload_json
from modtrans.formats.registry import Format, Output, register
from modtrans.plan import Plan, project
from modtrans.plan.simai import project_simai, refusal
from modtrans.plan.sizes import Consumer
from modtrans.strategy import Parallelism
from modtrans.workload.model import Dialect, Header, Workload


def header(header: Header, parallel: Parallelism) -> Header:
    """SimAI's keyed header: every key it expects set (no pipeline or expert parallelism: 1).
    The checkpoints are those of every dialect (by default one at layer 0, the recomputation
    started at the last layer): one default, whatever the consumer (SimAI reads only the first
    index of a list: D306 when there are several)."""
    group = header.model_parallel_group or parallel.group or 1
    return dataclasses.replace(
        header, model_parallel_group=group, ep=1, pp=1, vpp=1, ga=1, all_gpus=parallel.npus
    )


def projected(plan: Plan, parallel: Parallelism) -> Workload:
    """SimAI's workload of `plan`: AICB's for a layout, the keyword's text with SimAI's header."""
    if plan.is_llm:
        return project_simai(plan)
    workload = project(plan, Consumer.SIMAI)
    return dataclasses.replace(workload, header=header(workload.header, parallel))


TEXT = register(
    Output(
        Format.TEXT, Dialect.SIMAI, "SimAI's workload text", projected, text.render, refusal, check=text.check
    )
)
JSON = register(
    Output(Format.JSON, Dialect.SIMAI, "SimAI's workload JSON", projected, workload_json.render, refusal)
)
