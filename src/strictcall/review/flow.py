"""The value tracking behind `strictcall lint`: in each function, the values that may be
missing or falsy (a `.get`, a subscript under a presence guard, an attribute), followed through
local names into truth tests and `or` defaults; each use weighed by what the code says of the
value's legal falsy values."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Final, Literal

from strictcall.review.evidence import (
    answer_of,
    compared_as_data,
    keys_read,
    names_after_or,
    or_operand,
    shown_code,
)
from strictcall.review.finding import Confidence
from strictcall.review.legal import (
    EMPTY_TEXT,
    EVERY,
    FALSE,
    NULL,
    ORDER,
    ZERO,
    Declared,
    Facts,
    declared_field,
    kinds_of,
    schema_field,
    shown_type,
    value_annotation,
)
from strictcall.review.shapes import (
    FLAG,
    as_container,
    as_number,
    as_union,
    asks_nothing,
    constant_key,
    decides_answer,
    is_answer,
    is_get,
    is_namespace,
    is_none_test,
    is_number,
    is_true,
    own_nodes,
    truth_context,
    type_name,
)
from strictcall.review.shapes import (
    subject as subject_of,
)
from strictcall.review.specs import Specified, spec_says_absent_is_false, specified

Kind = Literal["get", "subscript", "attribute"]
Use = Literal["truth", "or", "none"]


@dataclass(frozen=True, slots=True)
class Read:
    """A value that may be missing or falsy: where it was read and what the code declares."""

    kind: Kind
    node: ast.expr
    receiver: ast.expr
    key: str | None
    """The key or attribute name when it is a constant."""
    key_node: ast.expr | None
    default: ast.expr | None = None
    """A `.get`'s second argument."""
    declared: Declared | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """One use of a read value that may mishandle a legal falsy value."""

    use: Use
    node: ast.expr
    """Where to point: the tested expression."""
    read: Read
    name: str | None
    """The local name the value flowed into, when it did."""
    context: str
    """How it is used: `if`, `not`, `all()`, `or 60.0` ..."""
    falsy: tuple[str, ...]
    why: str
    confidence: Confidence
    default: ast.expr | None = None


@dataclass(slots=True)
class _Binding:
    line: int
    col: int
    read: Read | None


@dataclass(slots=True)
class Scope:
    """One function (or the module's top level) and what it says about its values."""

    node: ast.AST
    facts: Facts
    parents: dict[ast.AST, ast.AST]
    owner: str | None = None
    """The class a method belongs to, for `self.x`."""
    source: str = ""
    nodes: list[ast.AST] = field(default_factory=list)
    annotations: dict[str, ast.expr] = field(default_factory=dict)
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)
    guards: set[tuple[str, str]] = field(default_factory=set)
    none_tests: dict[str, int] = field(default_factory=dict)
    narrowed: dict[str, Declared] = field(default_factory=dict)
    """Values the code checks with `isinstance(x, T)`: the falsy values T admits."""
    hits: list[Hit] = field(default_factory=list)
    _keys_cache: dict[str, frozenset[str]] = field(default_factory=dict)

    def run(self) -> list[Hit]:
        """Every hit in the scope, in source order."""
        self.nodes = sorted(own_nodes(self.node), key=_position)
        self._learn()
        for node in self.nodes:
            self._consider(node)
        return self.hits

    # --- what the scope says ---------------------------------------------------------------

    def _learn(self) -> None:
        arguments = getattr(self.node, "args", None)
        if isinstance(arguments, ast.arguments):
            for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
                if arg.annotation is not None:
                    self.annotations[arg.arg] = arg.annotation
        for node in self.nodes:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.annotations.setdefault(node.target.id, node.annotation)
            if isinstance(node, ast.Compare) and len(node.ops) == 1:
                self._learn_compare(node)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "hasattr"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                self.guards.add((ast.dump(node.args[0]), node.args[1].value))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
            ):
                kinds = kinds_of(as_union(node.args[1]), self.facts)
                if kinds is not None:
                    where = f"line {node.lineno} checks `{ast.unparse(node)[:50]}`"
                    self.narrowed.setdefault(subject_of(node.args[0]), Declared(kinds, where))
        for node in self.nodes:
            self._learn_binding(node)

    def _learn_compare(self, node: ast.Compare) -> None:
        op = node.ops[0]
        left, right = node.left, node.comparators[0]
        if isinstance(op, ast.In | ast.NotIn):
            if isinstance(left, ast.Constant) and isinstance(left.value, str):
                self.guards.add((ast.dump(right), left.value))
        elif isinstance(op, ast.Is | ast.IsNot):
            for side, other in ((left, right), (right, left)):
                if isinstance(other, ast.Constant) and other.value is None:
                    self.none_tests.setdefault(subject_of(side), node.lineno)

    def _learn_binding(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._bind(target, node.value, node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            read = self.read_of(node.value) if node.value is not None else None
            if read is not None:
                kinds = kinds_of(node.annotation, self.facts)
                if kinds is not None:
                    where = f"`{node.target.id}` is annotated `{shown_type(node.annotation)}`"
                    read = _with_declared(read, Declared(kinds, where))
            self._add_binding(node.target.id, node, read)
        elif isinstance(node, ast.NamedExpr):
            self._add_binding(node.target.id, node, self.read_of(node.value))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            self._bind(node.target, None, node)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            self._add_binding(node.target.id, node, None)

    def _bind(self, target: ast.expr, value: ast.expr | None, at: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self._add_binding(target.id, at, self.read_of(value) if value is not None else None)
        elif isinstance(target, ast.Tuple | ast.List):
            values = value.elts if isinstance(value, ast.Tuple | ast.List) else None
            if values is not None and len(values) != len(target.elts):
                values = None
            for i, element in enumerate(target.elts):
                self._bind(element, values[i] if values is not None else None, at)

    def _add_binding(self, name: str, at: ast.AST, read: Read | None) -> None:
        line, col = _position(at)
        if isinstance(at, ast.Assign | ast.AnnAssign) and at.value is not None:
            line, col = at.value.end_lineno or line, at.value.end_col_offset or col
        self.bindings.setdefault(name, []).append(_Binding(line, col, read))

    def bound(self, name: ast.Name) -> Read | None:
        """The read a local name holds where it is used, if its last assignment was one."""
        found: Read | None = None
        here = _position(name)
        for binding in self.bindings.get(name.id, []):
            if (binding.line, binding.col) < here:
                found = binding.read
        return found

    def read_of(self, node: ast.expr) -> Read | None:
        """The read `node` is, when it may be missing or falsy: a `.get`, a subscript under
        a presence guard, an attribute."""
        if is_get(node):
            assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            receiver = node.func.value
            if is_namespace(receiver):
                return None
            key_node = node.args[0]
            key = constant_key(key_node)
            default = node.args[1] if len(node.args) == 2 else None
            if isinstance(default, ast.Constant) and default.value is None:
                default = None
            read = Read("get", node, receiver, key, key_node, default)
            return _with_declared(read, self._declared_key(receiver, key))
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and (ast.dump(node.value), node.slice.value) in self.guards
        ):
            key = node.slice.value
            read = Read("subscript", node, node.value, key, node.slice)
            return _with_declared(read, self._declared_key(node.value, key))
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and or_operand(node, self.parents)
            and not is_namespace(node.value)
        ):
            # `d["k"] or default`: the key is there, and a falsy value in it is replaced
            key = node.slice.value
            read = Read("subscript", node, node.value, key, node.slice)
            return _with_declared(read, self._declared_key(node.value, key))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            parent = self.parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                return None
            if is_namespace(node.value) or node.attr.startswith("__"):
                return None
            read = Read("attribute", node, node.value, node.attr, None)
            return _with_declared(read, self._declared_attribute(node))
        return None

    def _declared_key(self, receiver: ast.expr, key: str | None) -> Declared | None:
        annotation_of: ast.expr | None = None
        shown = ""
        if isinstance(receiver, ast.Name):
            annotation_of, shown = self.annotations.get(receiver.id), receiver.id
        elif (
            isinstance(receiver, ast.Attribute)
            and isinstance(receiver.value, ast.Name)
            and receiver.value.id == "self"
            and self.owner is not None
        ):
            annotation_of = (self.facts.class_fields(self.owner) or {}).get(receiver.attr)
            shown = f"self.{receiver.attr}"
        if annotation_of is not None:
            found = value_annotation(annotation_of, self.facts)
            if found is not None:
                owner, annotation = found
                if owner:
                    return declared_field(owner, key, self.facts) if key else None
                kinds = kinds_of(annotation, self.facts)
                if kinds is not None:
                    where = f"`{shown}` holds `{shown_type(annotation)}` values"
                    return Declared(kinds, where)
        if key is None:
            return None
        return schema_field(key, self.facts)

    def _declared_attribute(self, node: ast.Attribute) -> Declared | None:
        owner: str | None = None
        if isinstance(node.value, ast.Name):
            if node.value.id == "self":
                owner = self.owner
            else:
                found = value_annotation(self.annotations.get(node.value.id), self.facts)
                owner = found[0] if found is not None and found[0] else None
                annotation = self.annotations.get(node.value.id)
                if owner is None and annotation is not None:
                    name = type_name(annotation)
                    owner = name if self.facts.class_fields(name) is not None else None
        return declared_field(owner, node.attr, self.facts)

    # --- the uses ---------------------------------------------------------------------------

    def _consider(self, node: ast.AST) -> None:
        if not isinstance(node, ast.expr):
            return
        name: str | None = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            read = self.bound(node)
            name = node.id
        elif isinstance(node, ast.NamedExpr):
            read = self.read_of(node.value)
            name = node.target.id
        else:
            read = self.read_of(node)
        if read is None:
            return
        context = truth_context(node, self.parents)
        if context is not None:
            self._weigh(Hit("truth", node, read, name, context, (), "", "guess"))
            return
        parent = self.parents.get(node)
        if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or):
            index = next(i for i, v in enumerate(parent.values) if v is node)
            if index + 1 < len(parent.values):
                default = parent.values[index + 1]
                hit = Hit("or", node, read, name, "or", (), "", "guess", default)
                self._weigh(hit)
            return
        if isinstance(parent, ast.Compare) and is_none_test(parent) and read.kind == "get":
            self._weigh(Hit("none", node, read, name, "is None", (), "", "guess"))

    def _weigh(self, hit: Hit) -> None:
        """Keep the hit: shown when the code shows that a falsy value has a meaning there (the
        evidence), else a guess for --explore; dropped when the code shows none is legal."""
        read = hit.read
        if read.key is not None and FLAG.search(read.key.lower()) and hit.use != "or":
            return
        if hit.use == "truth" and spec_says_absent_is_false(read.key):
            return
        declared = read.declared
        if declared is None or declared.kinds == EVERY:
            declared = self.narrowed.get(subject_of(hit.node), declared)
        if hit.use == "none":
            self._weigh_none(hit, declared)
            return
        if hit.use == "truth" and read.default is not None:
            return  # `.get(k, default)`: a missing key reads as the default the author chose
        if hit.use == "or":
            assert hit.default is not None
            if asks_nothing(hit.default, read.kind, read.key, read.receiver):
                return
            if isinstance(read.default, ast.Constant) and not read.default.value:
                return
        spec = specified(read.key, self._keys_read(read.receiver), hit.use)
        judged = self._judge(hit, declared, spec)
        if judged is None:
            return
        falsy, guess = judged
        shown = self._evidence(hit, declared, spec, falsy)
        if shown is not None:
            self._keep(hit, shown[0], shown[1], "shown")
        else:
            self._keep(hit, falsy, guess, "guess")

    def _judge(
        self, hit: Hit, declared: Declared | None, spec: Specified | None
    ) -> tuple[frozenset[str], str] | None:
        """The falsy values the line may mishandle and why that is only a guess; None when the
        code shows none of them can reach it (a type without one, a value never absent)."""
        meant = bool(spec is not None or (declared is not None and declared.meant))
        if declared is not None and declared.kinds != EVERY:
            falsy = declared.kinds - {NULL}
            never_absent = hit.read.kind != "get" and NULL not in declared.kinds
            if never_absent and not (hit.use == "or" and meant):
                return None  # never absent: a truth test or `or` here is about the value itself
            if hit.use == "or" and is_true(hit.default):
                falsy &= {FALSE}
            else:
                falsy -= {FALSE}  # a flag, or bools combined with `or`
            if not falsy or (hit.read.kind == "attribute" and not falsy & {ZERO, FALSE}):
                return None
            shown = " and ".join(v for v in ORDER if v in falsy)
            why = f"{declared.where}, which admits {shown}; a declared type alone does not show "
            return falsy, why + "that a falsy value means something here"
        if hit.use == "or" and hit.default is not None:
            if is_number(hit.default):
                why = "the default is a number, so the value may be one; nothing shows 0 is"
                return frozenset({ZERO}), why + " more than unset here"
            if is_true(hit.default):
                why = "the default is true, so the value may be false; nothing shows false is"
                return frozenset({FALSE}), why + " more than unset here"
            if hit.read.kind == "attribute" and spec is None:
                return None
            return frozenset(_ALL_BUT_NULL), _COULD_NOT_TELL
        if hit.read.kind == "attribute" and spec is None:
            return None  # an attribute nothing declares: too often an object, never falsy
        return frozenset(_ALL_BUT_NULL), self._hint(hit)

    def _evidence(
        self,
        hit: Hit,
        declared: Declared | None,
        spec: Specified | None,
        falsy: frozenset[str],
    ) -> tuple[frozenset[str], str] | None:
        """What in the code shows that a falsy value has a meaning at this line: a protocol
        field's specification, a declaration giving it one, a comparison treating it as data,
        the value passed on as the function's answer."""
        if spec is not None and spec.meant & falsy:
            return spec.meant & falsy, spec.says
        if declared is not None and declared.meant & falsy:
            return declared.meant & falsy, declared.meaning
        uses = self._uses(hit) + self._uses_after_or(hit)
        for use in uses:
            compared = compared_as_data(use, self.parents, self.node, falsy, self.source)
            if compared is not None:
                return compared
        if (
            hit.use == "truth"
            and falsy - {EMPTY_TEXT}
            and hit.read.key is not None
            and not any(as_container(use, self.parents) for use in uses)
        ):
            passed = self._passed_on(hit)
            if passed is not None:
                line, text = passed
                why = (
                    f"line {line} passes the value on unchanged (`{text}`), so a falsy value "
                    "the sender sent is data"
                )
                return falsy, why
        return None

    def _weigh_none(self, hit: Hit, declared: Declared | None) -> None:
        read = hit.read
        if read.default is not None or self._fills_in(hit):
            return
        if declared is not None and NULL not in declared.kinds:
            return
        spec = specified(read.key, self._keys_read(read.receiver), "none")
        if spec is not None and NULL in spec.meant:
            self._keep(hit, (NULL,), spec.says, "shown")
            return
        reread = next(
            (n for n in self.nodes if isinstance(n, ast.expr) and _same_key(n, read)), None
        )
        if reread is not None:
            answer = decides_answer(hit.node, self.parents) and is_answer(reread, self.parents)
            if answer and (declared is None or declared.kinds == EVERY):
                why = (
                    f"line {reread.lineno} reads the key itself and passes it on unchanged, so "
                    "a present null is data"
                )
                if declared is not None:
                    why = f"{declared.where}, null among them; {why}"
                self._keep(hit, (NULL,), why, "shown")
            else:
                why = (
                    f"line {reread.lineno} reads the key itself, so the test may stand for its "
                    "presence; nothing shows a present null is data"
                )
                self._keep(hit, (NULL,), why, "guess")
        elif declared is not None and declared.kinds == EVERY:
            self._keep(hit, (NULL,), f"{declared.where}: null among them", "guess")
        else:
            self._keep(hit, (NULL,), "could not tell whether null is a value here", "guess")

    def _hint(self, hit: Hit) -> str:
        """Why a truth-tested value nothing declares might hold a legal falsy value."""
        if hit.read.key is None:
            return "a computed key (a lookup table or a cache, usually): " + _COULD_NOT_TELL
        if hit.context in ("all()", "any()", "filter(None, ...)"):
            return (
                f"{hit.context} makes the truth of each value the answer, so a falsy value "
                "counts as a missing one; nothing shows a falsy value is legal"
            )
        for use in self._uses(hit):
            if as_number(use, self.parents):
                return f"it is used as a number at line {use.lineno}, so 0 may be one"
        return _COULD_NOT_TELL

    def _keys_read(self, receiver: ast.expr) -> frozenset[str]:
        """The constant keys (and attributes) the scope reads from the same receiver."""
        wanted = ast.dump(receiver)
        found = self._keys_cache.get(wanted)
        if found is None:
            found = self._keys_cache[wanted] = keys_read(self.nodes, wanted)
        return found

    def _uses_after_or(self, hit: Hit) -> list[ast.expr]:
        """For `x = d.get(k) or default`: the later reads of `x`."""
        if hit.use != "or":
            return []
        return names_after_or(hit.node, self.parents, self.nodes)

    def _uses(self, hit: Hit) -> list[ast.expr]:
        """Other reads of the same value in the scope: the name, or the same key again."""
        subject = subject_of(hit.node)
        found: list[ast.expr] = []
        for node in self.nodes:
            if node is hit.node or not isinstance(node, ast.expr):
                continue
            if hit.name is not None:
                if (
                    isinstance(node, ast.Name)
                    and isinstance(node.ctx, ast.Load)
                    and node.id == hit.name
                    and (bound := self.bound(node)) is not None
                    and bound.node is hit.read.node
                ):
                    found.append(node)
            elif subject_of(node) == subject or _same_key(node, hit.read):
                found.append(node)
        return found

    def _passed_on(self, hit: Hit) -> tuple[int, str] | None:
        """The line where the value becomes the function's answer unchanged, when the truth
        test decides that answer (the seed's `if not result: return error` then `return
        {"value": result}`); copying a value only when it is truthy is not counted, nor
        returning it from a function declared to return a text (an empty one means none)."""
        if hit.use == "truth" and not decides_answer(hit.node, self.parents):
            return None
        returns = kinds_of(getattr(self.node, "returns", None), self.facts)
        text_only = returns is not None and returns - {NULL} <= {EMPTY_TEXT}
        for use in self._uses(hit):
            if text_only and isinstance(self.parents.get(use), ast.Return):
                continue
            if is_answer(use, self.parents):
                return use.lineno, shown_code(answer_of(use, self.parents), self.source)
        return None

    def _fills_in(self, hit: Hit) -> bool:
        """`if d.get(k) is None: d[k] = ...`: null and missing are both filled in, on purpose."""
        compare = self.parents.get(hit.node)
        statement = self.parents.get(compare) if compare is not None else None
        if not isinstance(statement, ast.If):
            return False
        receiver = ast.dump(hit.read.receiver)
        return any(
            isinstance(target, ast.Subscript) and ast.dump(target.value) == receiver
            for child in statement.body
            if isinstance(child, ast.Assign)
            for target in child.targets
        )

    def _keep(
        self, hit: Hit, falsy: frozenset[str] | tuple[str, ...], why: str, c: Confidence
    ) -> None:
        ordered = tuple(value for value in ORDER if value in falsy)
        confidence: Confidence = c
        self.hits.append(
            Hit(
                hit.use,
                hit.node,
                hit.read,
                hit.name,
                hit.context,
                ordered,
                why,
                confidence,
                hit.default,
            )
        )


_ALL_BUT_NULL: Final = (ZERO, FALSE, EMPTY_TEXT, "[]", "{}")
_COULD_NOT_TELL: Final = "could not tell: nothing in the code says what it holds"


def scopes(tree: ast.Module, facts: Facts, source: str = "") -> list[Scope]:
    """The module's top level and every function in it, each with the class it belongs to."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    found = [Scope(tree, facts, parents, source=source)]
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            parent = parents.get(node)
            owner = parent.name if isinstance(parent, ast.ClassDef) else None
            found.append(Scope(node, facts, parents, owner, source=source))
    return found


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _with_declared(read: Read, declared: Declared | None) -> Read:
    if declared is None:
        return read
    return Read(
        read.kind, read.node, read.receiver, read.key, read.key_node, read.default, declared
    )


def _same_key(node: ast.AST, read: Read) -> bool:
    return (
        read.key_node is not None
        and isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and ast.dump(node.value) == ast.dump(read.receiver)
        and ast.dump(node.slice) == ast.dump(read.key_node)
    )
