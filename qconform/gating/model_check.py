"""The whole-model check: where does a user's model's output start to leave what the text permits?

Why: a group certified alone on qconform's inputs says how the runtime computes that group; the
user's question is about the model as the runtime runs it whole (fused, optimised, in one session).
So the whole model runs once per input set on the runner with every judged group's output exposed
as a graph output; then each judged group, in the graph's topological order, is evaluated by the
oracle on the values the runner itself fed it there, and the runner's output of that group is
judged against every permitted reading by the engine (``Pipeline.judge_call``: the one comparison
rule and the diagnosis). The first group whose output leaves the permitted readings is named, with
its diagnosis and a reproducer that runs that group alone on those inputs. Judging each group on
the runner's own inputs is what makes "first" meaningful: a deviation upstream changes what a later
group reads, never the readings it is held to (semantics.md#model-group). A node in no judged group is not checked; the check
says which, once (where every node is covered, the model's outputs are then judged end to end).

Only quantized tensors (and the model's own inputs and outputs) are exposed: a float tensor between
two nodes made a graph output would change what an optimising runtime fuses (onnxruntime fuses
DequantizeLinear → op → QuantizeLinear only where the op's and the DequantizeLinear's outputs stay
inside the graph), so a group that reads or writes one is left out of the whole-model check, said once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from qconform import dtypes
from qconform.case import Case
from qconform.gating import model_cases as mc
from qconform.gating import model_groups as mg
from qconform.verdicts import DEVIATING, Verdict

#: The input sets each graph input takes from the group that reads it (``model_cases.input_sets``).
SETS = ("codes-0", "random-0", "random-1")
#: Where the reproducer of the first deviating group is written, inside the report directory.
CHECK_DIR = "model-check"


@dataclass
class Found:
    """A group's output outside the permitted readings, on the runner's own inputs of one set."""

    group: mg.Group
    set_name: str
    verdict: Verdict
    message: str
    diagnosis: list[str] | None
    case: Case


@dataclass
class Check:
    """The check's outcome: ``why`` non-empty when it could not run; ``first`` the first deviating
    group (None: none deviates on any set); ``uncovered`` the nodes no judged group holds."""

    sets: list[str] = field(default_factory=list)
    judged: int = 0
    first: Found | None = None
    uncovered: list[str] = field(default_factory=list)
    #: judged groups left out because a float tensor between nodes would have to be exposed
    unexposed: list[str] = field(default_factory=list)
    why: str = ""
    #: groups the oracle could not judge on the runner's own values (each once, with its first reason)
    refused: list[str] = field(default_factory=list)
    #: each group judged, by label: its verdict per input set
    verdicts: dict[str, dict[str, Verdict]] = field(default_factory=dict)

    def lines(self, info: mg.Info) -> list[str]:
        """What the check found, as the terminal and groups.md say it."""
        if self.why:
            return [f"whole-model check: not made: {self.why}"]
        scope = "every node is in a judged group" if not self.uncovered else \
            f"{len(self.uncovered)} node(s) in no judged group, not checked: {', '.join(self.uncovered)}"
        out = [f"whole-model check: the model run whole on {len(self.sets)} input set(s) "
               f"({', '.join(self.sets)}); {self.judged} group outputs judged on the runner's own inputs; {scope}"]
        if self.unexposed:
            out.append(f"whole-model check: {len(self.unexposed)} judged group(s) read or write a float tensor between "
                       f"nodes, which exposing would change what the runtime fuses, so not checked whole: "
                       f"{', '.join(self.unexposed)}")
        if self.first is None:
            out.append("whole-model check: no judged group's output leaves the permitted readings")
        else:
            f = self.first
            named = ", ".join(f.diagnosis) if f.diagnosis else "no deviation model reproduces it" \
                if f.diagnosis is not None else "not diagnosed"
            out.append(f"whole-model check: the first group whose output leaves the permitted readings: "
                       f"{f.group.label} ({f.group.describe(info)}), input set {f.set_name}: {f.verdict}; "
                       f"diagnosis: {named}; reproducer: {CHECK_DIR}/{f.case.id.rsplit('/', 1)[-1]}.onnx")
            out += ["    " + line for line in f.message.splitlines()[:6]]
        out += [f"whole-model check: {line}" for line in self.refused]
        return out

    def record(self, info: mg.Info) -> dict:
        """The outcome as report.json's ``invocation.model.whole`` holds it (what ``gate`` reads)."""
        if self.why:
            return {"made": False, "why": self.why}
        first = None
        if self.first is not None:
            f = self.first
            first = {"group": f.group.label, "nodes": f.group.describe(info), "set": f.set_name,
                     "verdict": str(f.verdict), "diagnosis": f.diagnosis,
                     "reproducer": f"{CHECK_DIR}/{f.case.id.rsplit('/', 1)[-1]}.onnx"}
        return {"made": True, "sets": list(self.sets), "judged": self.judged, "uncovered": len(self.uncovered),
                "unexposed": len(self.unexposed), "first": first}


def input_feeds(built: mc.Built) -> list[tuple[str, dict[str, np.ndarray]]]:
    """The whole model's input sets: each graph input takes the values the group that reads it was
    judged on (its code range, seeded random codes), else seeded values of its type; the
    calibration input where one was given."""
    info = built.info
    inits = set(info.constants)
    readers: dict[str, dict[str, np.ndarray]] = {}
    for g in built.judged:
        by_name = dict(mc.input_sets(info, g))
        for s in g.slots:
            if s.value is None and s.name not in readers and all(n in by_name for n in SETS):
                readers[s.name] = {n: by_name[n][s.local] for n in SETS}
    sets: list[tuple[str, dict[str, np.ndarray]]] = []
    graph_inputs = [vi.name for vi in info.model.graph.input if vi.name not in inits]
    for name in SETS:
        feeds = {}
        for x in graph_inputs:
            t, shape = info.types.get(x), info.shapes.get(x)
            if x in readers:
                feeds[x] = readers[x][name]
            elif t is None or shape is None:
                return []
            else:
                draw = mc.rng("whole", x, name)
                et = dtypes.get(t)
                v = draw.integers(*et.qrange, size=shape, endpoint=True) if et.is_integer else draw.normal(0, 2, shape)
                feeds[x] = mc.as_array(t, v, shape)
        sets.append((f"whole-{name}", feeds))
    if built.calib is not None and all(x in built.calib and info.types.get(x) for x in graph_inputs):
        sets.append(("whole-calibration", {x: np.asarray(built.calib[x]).astype(dtypes.get(info.types[x]).dtype)
                                           for x in graph_inputs}))
    return sets


def exposed(info: mg.Info, groups: list[mg.Group]) -> onnx.ModelProto:
    """The model with every judged group's outputs and data inputs as graph outputs too (after its
    own outputs, which keep their places)."""
    model = onnx.ModelProto()
    model.CopyFrom(info.model)
    g = model.graph
    have = {o.name for o in g.output} | {i.name for i in g.input} | set(info.constants)
    for group in groups:
        for name in [*(s.name for s in group.slots if s.value is None), *group.outputs]:
            if name in have:
                continue
            have.add(name)
            vi = g.output.add()
            vi.name = name
            t, shape = info.types.get(name), info.shapes.get(name)
            if t is not None:
                vi.type.tensor_type.elem_type = dtypes.get(t).onnx
                if shape is not None:
                    vi.type.tensor_type.shape.SetInParent()
                    for d in shape:
                        vi.type.tensor_type.shape.dim.add().dim_value = d
    return model


def check(built: mc.Built, runner, *, strict_nan: bool = False, profile: str = "default",
          diagnose: bool = True, every: bool = False) -> Check:
    """Run the model whole on ``runner`` and name the first judged group whose output leaves the
    permitted readings (module docstring); ``every``: judge the groups after it too (``verdicts``),
    each still on the values the runner fed it (semantics.md#model-group)."""
    from qconform.execution import Pipeline
    from qconform.isolation import CallResult
    from qconform.verdicts import Call

    info = built.info
    in_groups = {i for g in built.judged for i in g.members}
    out = Check(uncovered=[f"{n.name or f'#{i}'} ({n.op_type})" for i, n in enumerate(info.nodes)
                           if i not in in_groups and n.op_type != "Constant"])
    ordered = sorted(built.judged, key=lambda g: g.position(info))
    judged = [g for g in ordered if quiet(info, g)]
    out.unexposed = [g.label for g in ordered if not quiet(info, g)]
    if not judged:
        out.why = "no group of the model is judged"
        return out
    sets = input_feeds(built)
    if not sets:
        out.why = "a graph input's type or shape is not known"
        return out
    model = exposed(info, judged)
    names = [o.name for o in model.graph.output]
    pipeline = Pipeline.local(runner, diagnose=diagnose, strict_nan=strict_nan, profile=profile)
    for set_name, feeds in sets:
        result, _ = pipeline.call_model(model, feeds)
        if result.kind != Call.OK or len(result.outputs) != len(names):
            got = f"{result.kind}: {result.message}" if result.kind != Call.OK else \
                f"{len(result.outputs)} outputs for {len(names)}"
            out.why = f"the runner did not run the whole model ({got})"
            return out
        out.sets.append(set_name)
        values = {**feeds, **dict(zip(names, result.outputs))}
        for g in judged:
            if not every and out.first is not None and g.position(info) >= out.first.group.position(info):
                break  # a later group cannot be the first
            case, why = _case_on(info, g, set_name, values)
            if case is None:
                if not any(r.startswith(f"{g.label}: ") for r in out.refused):  # each group said once
                    out.refused.append(why)
                continue
            judged_call = pipeline.judge_call(case, CallResult(Call.OK, outputs=[values[o] for o in g.outputs]))
            out.judged += 1
            out.verdicts.setdefault(g.label, {})[set_name] = judged_call.verdict
            if judged_call.verdict in DEVIATING and (
                    out.first is None or g.position(info) < out.first.group.position(info)):
                out.first = Found(g, set_name, judged_call.verdict, judged_call.message or judged_call.record.problem,
                                  judged_call.record.diagnosis, case)
                if not every:
                    break
    return out


def gate(report: dict) -> None:
    """Fail the report's gate where the whole-model check found a group leaving the permitted readings
    (``assembly.assemble``, for both front-ends): a model whose groups pass alone but not as the
    runtime runs it whole has not passed, and its report, certificate and exit status say so alike."""
    from qconform.report.certificate import model_finding

    found = model_finding(report)
    if found and "gate" in report:
        report["gate"]["passed"] = False
        report["gate"]["messages"].append(f"whole-model check: {found} (see groups.md)")


def quiet(info: mg.Info, g: mg.Group) -> bool:
    """Whether the group's data inputs and outputs can be exposed without changing what a runtime
    fuses: each a graph input or output of the model, or a quantized (integer) tensor."""
    ends = {vi.name for vi in info.model.graph.input} | {vi.name for vi in info.model.graph.output}
    names = [*(s.name for s in g.slots if s.value is None), *g.outputs]
    return all(n in ends or (info.types.get(n) is not None and dtypes.get(info.types[n]).is_integer) for n in names)


def _case_on(info: mg.Info, g: mg.Group, set_name: str, values: dict[str, np.ndarray]) -> tuple[Case | None, str]:
    """The group's case on the runner's own values of its data inputs, or (None, why not)."""
    from qconform.oracle import InvalidModel, evaluate

    data = {}
    for s in g.slots:
        if s.value is not None:
            continue
        v = np.asarray(values.get(s.name))
        want = dtypes.get(s.type).dtype
        if v.dtype != want or v.shape != s.shape:
            return None, (f"{g.label}: the runner gave {s.name!r} as {v.dtype}{list(v.shape)}, the model says "
                          f"{s.type}{list(s.shape)}: the group is not judged on it")
        data[s.local] = v
    try:
        return evaluate(mc.draft(info, g, set_name, data)), ""
    except (InvalidModel, LookupError, ValueError, TypeError, KeyError, IndexError) as exc:
        return None, f"{g.label}: the oracle refuses it on the runner's values: {type(exc).__name__}: " \
                     f"{(str(exc).splitlines() or [''])[0]}"


def case_files(case: Case) -> dict[str, bytes]:
    """One case alone: its model and inputs in ONNX's backend-test layout (``model.runnable_files``)
    and the outputs of its first reading (the latest text's), flattened under ``CHECK_DIR`` as
    ``NAME.onnx``, ``NAME.input_N.pb`` and ``NAME.expected_N.pb`` (NAME: the case's, LABEL.SET)."""
    from qconform.model import runnable_files, tensor_bytes

    stem = case.id.rsplit("/", 1)[-1]
    out = {}
    for name, data in runnable_files(case).items():
        out[f"{CHECK_DIR}/{stem}.{'onnx' if name == 'model.onnx' else name.rsplit('/', 1)[-1]}"] = data
    for k, (name, arr) in enumerate(zip(case.output_names, case.expected)):
        out[f"{CHECK_DIR}/{stem}.expected_{k}.pb"] = tensor_bytes(arr, name)
    return out


def reproducer(found: Found) -> dict[str, bytes]:
    """The first deviating group of the model run whole, alone, on the inputs the runner fed it there."""
    return case_files(found.case)


def _label(case_id: str) -> str:
    return case_id.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def first_deviations(built: mc.Built, records: list[dict]) -> dict[str, Case]:
    """Each deviating group's first deviating case (by the records' verdicts), by group label."""
    cases = {c.id: c for c in built.cases}
    out: dict[str, Case] = {}
    for rec in records:
        cid = str(rec.get("id", ""))
        if rec.get("verdict") in DEVIATING and cid in cases and _label(cid) not in out:
            out[_label(cid)] = cases[cid]
    return out


def documents(built: mc.Built, records: list[dict], whole: Check | None) -> dict[str, str | bytes]:
    """What a front-end writes beside a model's report (``report.writer.add``: listed in SHA256SUMS):
    groups.md, each deviating group's reproducer (its first deviating case alone) and the whole-model
    check's."""
    failing = first_deviations(built, records)
    files: dict[str, str | bytes] = {mc.GROUPS_FILE: groups_md(built, records, whole, failing)}
    for case in failing.values():
        files.update(case_files(case))
    if whole is not None and whole.first is not None:
        files.update(reproducer(whole.first))
    return files


def _diagnosis(rec: dict) -> str:
    """A deviating case's diagnosis as groups.md says it: the models that reproduce it, or where the
    difference sits, or that it was not diagnosed."""
    models = rec.get("diagnosis")
    if models:
        return f"diagnosis: {', '.join(models)}"
    if models is None:
        return "not diagnosed"
    step = rec.get("diagnosis_step")
    return "diagnosis: no deviation model reproduces it" + (f" ({step})" if step else "")


def groups_md(built: mc.Built, records: list[dict], whole: Check | None,
              failing: dict[str, Case] | None = None) -> str:
    """groups.md: every group once, with its nodes and its verdicts (or why it was not judged; a
    deviating one with its first deviating case's diagnosis and reproducer), the notes on the model,
    and the whole-model check. ``records``: the report's, each with its diagnosis where it has one."""
    info, groups = built.info, built.groups
    by_id = {str(rec.get("id", "")): rec for rec in records}
    verdicts: dict[str, dict[str, int]] = {}
    for rec in records:
        v = verdicts.setdefault(_label(str(rec.get("id", ""))), {})
        v[rec.get("verdict", "?")] = v.get(rec.get("verdict", "?"), 0) + 1
    lines = [f"# Groups of {info.path.name}", "",
             f"{len(groups)} groups: {sum(1 for g in groups if not g.reason)} judged, "
             f"{sum(1 for g in groups if g.reason)} not judged.", ""]
    lines += [f"- note: {n}" for n in info.notes]
    lines += ["", "| group | kind | nodes | status |", "| --- | --- | --- | --- |"]
    for g in groups:
        if g.reason:
            status = f"not judged: {g.reason}"
        else:
            got = verdicts.get(g.label)
            status = ", ".join(f"{k} {v}" for k, v in sorted(got.items())) if got else "judged (no report)"
            if failing and g.label in failing:
                case_id = failing[g.label].id
                stem = case_id.rsplit("/", 1)[-1]
                status += f"; {_diagnosis(by_id.get(case_id, {}))}; reproducer: {CHECK_DIR}/{stem}.onnx ({case_id})"
        lines.append(f"| {g.label or '-'} | {g.kind} | {g.describe(info)} | {status.replace('|', '/')} |")
    if whole is not None:
        lines += ["", "## The whole model", ""] + [f"- {line.strip()}" if not line.startswith("    ") else line
                                                   for line in whole.lines(info)]
    return "\n".join(lines) + "\n"


__all__ = ["CHECK_DIR", "Check", "Found", "case_files", "check", "documents", "exposed", "first_deviations",
           "gate", "groups_md", "input_feeds", "quiet", "reproducer"]
