"""Hypothesis strategies for workloads of every keyword and dialect."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from modtrans.comm import CommType, Policy
from modtrans.workload.dialects import CHAKRA_POLICIES
from modtrans.workload.model import Dialect, Header, Layer, Phase, Workload

NAMES = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:-", min_size=1, max_size=24
)
TIMES = st.integers(min_value=0, max_value=2**63 - 1)
SMALL = st.integers(min_value=0, max_value=2**31 - 1)
PORTABLE = [CommType.NONE, CommType.ALLREDUCE, CommType.ALLGATHER, CommType.REDUCESCATTER, CommType.ALLTOALL]
LAYER_POLICIES = [Policy.DATA, Policy.MODEL, Policy.HYBRID_DATA_MODEL, Policy.HYBRID_MODEL_DATA]
CHAKRA = sorted(CHAKRA_POLICIES)  # the keywords Chakra's converter accepts


def phases(comm_types: list[CommType]) -> st.SearchStrategy[Phase]:
    return st.builds(Phase, TIMES, st.sampled_from(comm_types), TIMES)


def layers(policy: Policy, comm_types: list[CommType]) -> st.SearchStrategy[Layer]:
    layer_policy = st.sampled_from(LAYER_POLICIES) if policy is Policy.HYBRID_CUSTOMIZED else st.none()
    return st.builds(
        Layer,
        NAMES,
        phases(comm_types),
        phases(comm_types),
        phases(comm_types),
        TIMES,
        st.integers(min_value=-(2**31), max_value=2**31 - 1),
        layer_policy,
    )


@st.composite
def workloads(draw: st.DrawFn, dialect: Dialect) -> Workload:
    policy = draw(st.sampled_from(CHAKRA if dialect is Dialect.CHAKRA else list(Policy)))
    simai = dialect is Dialect.SIMAI
    comm_types = list(CommType) if simai else PORTABLE
    body = draw(st.lists(layers(policy, comm_types), max_size=6))
    n = len(body)
    index_list = st.lists(st.integers(min_value=0, max_value=max(n - 1, 0)), max_size=3) if n else st.just([])
    values: dict[str, Any] = {}
    if policy.is_transformer:
        values["model_parallel_group"] = draw(st.integers(min_value=1, max_value=4096))
    if policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        values["checkpoints"] = tuple(draw(index_list))
        values["checkpoint_initiates"] = tuple(draw(index_list))
    if policy.is_dlrm:
        values["dlrm_last_bottom_layer"] = draw(st.integers(min_value=0, max_value=max(n - 1, 0)))
    if simai:
        for key in ("ep", "pp", "vpp", "ga", "all_gpus", "pp_comm"):
            values[key] = draw(st.none() | SMALL)
    return Workload(Header(policy, **values), tuple(body))
