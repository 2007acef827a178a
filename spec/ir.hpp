#pragma once
/// The pipecheck IR: plain value types for `.pk` kernel specs and pipelines.
///
/// One expression tree serves integer expressions (shapes, index maps, guards,
/// slot indices) and tensor expressions (kernel bodies, pipeline compute).
/// Statements are a std::variant. Every node carries the source location it
/// was parsed from; locations and comments take no part in `==`.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace pipecheck::spec {

/// A position in a source file, 1-based; line 0 means "synthesized".
struct Loc {
  int line = 0;
  int col = 0;
  friend bool operator==(const Loc &, const Loc &) { return true; }
};
std::ostream &operator<<(std::ostream &, const Loc &);

enum class DType { f32, f16, bf16, i32, i16, i8, u8, boolean };
/// Bytes per element.
int dtype_bytes(DType);
bool dtype_is_float(DType);
/// The `.pk` spelling: "f32", "bf16", ..., "bool".
const char *to_string(DType);
std::optional<DType> parse_dtype(const std::string &);

/// Expression operators. Leaves: Int, Float, Name, Zeros, Undefined, Ellipsis, None.
enum class Op {
  Int,      ///< int_value
  Float,    ///< float_value (also `inf`)
  Name,     ///< a param, grid/loop variable, local binding or dtype name
  Ref,      ///< name[args...]: a block load / slot / HBM region; args are subscripts
  Ellipsis, ///< `...` inside a subscript
  Slice,    ///< lo:hi inside a subscript; args = {lo, hi}, each may be None
  None,     ///< an absent slice bound
  Zeros,    ///< `zeros`: a block of zeros shaped like the store target
  /// `undefined`: only as a whole store value, `X[...] = undefined` (X a
  /// scratch, or a pipeline's on-chip buffer): what X[...] holds becomes
  /// unspecified, as a pl.run_scoped allocation is at each entry of its scope.
  /// The executor fills it with poison; the checker takes it as never written.
  Undefined,
  Call, ///< name(args...), kwargs in `kwarg_names` (parallel to trailing args)
  Neg,  ///< -a
  Not,  ///< not a
  Add,
  Sub,
  Mul,
  Div,
  FloorDiv,
  Mod,
  Pow,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
  BitAnd, ///< a & b: logical on bool tensors, bitwise on integer tensors
  BitOr,  ///< a | b
  BitNot, ///< ~a
  Tuple,  ///< (a, b, ...): a shape argument (iota, reshape, broadcast_to)
};
const char *to_string(Op);

/// An expression node. `args` holds operands; Call keeps its function name in
/// `name` and the names of its keyword arguments in `kwarg_names` (the last
/// kwarg_names.size() args are keyword arguments, in order).
struct Expr {
  Op op = Op::Int;
  std::int64_t int_value = 0;
  double float_value = 0;
  std::string name;
  std::vector<Expr> args;
  std::vector<std::string> kwarg_names;
  Loc loc;

  static Expr integer(std::int64_t v, Loc l = {});
  static Expr floating(double v, Loc l = {});
  static Expr var(std::string n, Loc l = {});
  static Expr unary(Op op, Expr a, Loc l = {});
  static Expr binary(Op op, Expr a, Expr b, Loc l = {});
  static Expr call(std::string fn, std::vector<Expr> args, Loc l = {});
  static Expr ref(std::string n, std::vector<Expr> subscripts, Loc l = {});
  static Expr leaf(Op op, Loc l = {});

  /// This node with each argument a replaced by f(a), built without copying
  /// the arguments first (`Expr out = e;` then rewriting out.args copies
  /// every subtree once per level above it).
  template <class F> Expr map_args(F &&f) const {
    Expr out;
    out.op = op;
    out.int_value = int_value;
    out.float_value = float_value;
    out.name = name;
    out.kwarg_names = kwarg_names;
    out.loc = loc;
    out.args.reserve(args.size());
    for (const auto &a : args)
      out.args.push_back(f(a));
    return out;
  }

  /// Positional arguments of a Call (all args minus keyword ones).
  std::size_t num_positional() const { return args.size() - kwarg_names.size(); }
  /// The keyword argument `k` of a Call, or nullptr.
  const Expr *kwarg(const std::string &k) const;

  friend bool operator==(const Expr &, const Expr &);
};
std::ostream &operator<<(std::ostream &, const Expr &);

/// Comments attached to a node for `fmt`; ignored by `==`.
struct Comments {
  std::vector<std::string> leading; ///< full-line comments before the node, without '#'
  std::string trailing;             ///< comment at the end of the node's first line
  friend bool operator==(const Comments &, const Comments &) { return true; }
};

// ------------------------------------------------------------ block specs

enum class Role { in, out, scratch };
const char *to_string(Role);
/// `acc` is plgpu.ACC: a Mosaic GPU scratch in registers, zero at the start
/// of each CTA (scratch only, h100/h200 only).
enum class MemorySpace { vmem, any, smem, hbm, acc };
const char *to_string(MemorySpace);
enum class Revisit { immediate, any };
/// A semaphore scratch (`scratch sem: dma_sem[2]`, `scratch s: semaphore`):
/// pltpu.SemaphoreType.DMA / REGULAR; none for data operands.
enum class SemKind { none, dma, regular };
enum class DimSemantics { parallel, arbitrary, sequential };
const char *to_string(DimSemantics);

/// `pl.Buffered(buffer_count, use_lookahead)` plus the revisit mode.
struct PipelineMode {
  std::optional<Expr> buffer_count; ///< absent: the default (2)
  bool lookahead = false;
  Revisit revisit = Revisit::immediate;
  friend bool operator==(const PipelineMode &, const PipelineMode &) = default;
};

/// `(i, j) -> (i, 0)`: the grid-index lambda of a BlockSpec.
struct IndexMap {
  std::vector<std::string> params;
  std::vector<Expr> results;
  friend bool operator==(const IndexMap &, const IndexMap &) = default;
};

/// One `in`, `out` or `scratch` line: an array and its BlockSpec.
struct Operand {
  Role role = Role::in;
  std::string name;
  DType dtype = DType::f32;
  std::vector<Expr> shape;
  /// Absent: the whole array. An element that is nullopt is `None` (squeezed).
  std::optional<std::vector<std::optional<Expr>>> block_shape;
  std::optional<IndexMap> index_map; ///< absent: all zeros
  MemorySpace memory_space = MemorySpace::vmem;
  PipelineMode pipeline_mode;
  Loc loc;
  Comments comments;
  SemKind sem = SemKind::none; ///< a semaphore scratch: `shape` is the array of semaphores
  /// Set by flatten_nested on an operand whose block comes from an
  /// emit_pipeline's spec: the pipeline DMAs its windows itself, so
  /// pallas_call's window lowering rules (Mosaic's Element-dim rule) do not
  /// apply to it.
  bool emit_pipeline = false;
  friend bool operator==(const Operand &, const Operand &) = default;
};

// ---------------------------------------------------------------- statements

struct Stmt;
using Block = std::vector<Stmt>;

/// `target[...] = value` or `target[...] += value` (a store into a ref).
struct Assign {
  Expr target; ///< Op::Ref
  bool accumulate = false;
  Expr value;
  /// `target[...] = undefined`: no store, the target's contents become unspecified.
  bool discards() const { return value.op == Op::Undefined; }
  friend bool operator==(const Assign &, const Assign &) = default;
};
/// `T[s] = where(c, v, T[s])`, also through casts (megablox's bf16 store
/// `cast(where(c, acc, cast(T[s], f32)), bf16)`): the where, whose store
/// puts back T's elements where c fails (a keep store); nullptr for any
/// other store.
const Expr *keep_select(const Assign &);
/// The kept branch of a keep store (keep_select), through its casts: the
/// ref `T[s]` it puts back, which the store reads from nowhere (a Triton
/// masked store leaves those elements untouched); nullptr for any other.
const Expr *kept_ref(const Assign &);

/// A local's value that a later `when` discards before any use: `b =
/// o[...]` followed in its block by `when c: b = zeros` (a value that does
/// not name b, bound before anything in the branch names b), where the
/// statements between neither name b nor bind or store a name c reads. b's
/// value reaches a use only where c fails (`holds` false), or, through an
/// else branch that rebinds b so, only where c holds: the value's reads
/// count only there, as `where(c, zeros, o[...])`'s would (lax.cond's init
/// through a local). So too a rebinding `b = where(c, zeros, b)` (b used
/// only where c fails; `where(c, b, zeros)`: where it holds), whose `cond`
/// is the condition without its broadcast, possibly a tensor (data: no
/// value, selecting nothing away). Each entry one such statement; all of
/// them must select. (An unrolled program keeps a decided `when` that
/// rebinds an earlier local as `if 1:`, so that it discards there too.)
struct LocalDiscard {
  const Expr *cond = nullptr;
  bool holds = false;
};
/// The discards (LocalDiscard) of each binding of a local in `b` and the
/// blocks it holds (each followed within its own block).
std::map<const Stmt *, std::vector<LocalDiscard>> local_discards(const Block &b);

/// Whether `f(args...)` computes each element from the elements at the same
/// position of its arguments (broadcast): exp, abs, cast, maximum, the shifts, ...
bool is_elementwise_fn(const std::string &f);
/// Whether an operator computes each element from its operands' elements at
/// the same position: the arithmetic, comparison, logical and bitwise ones.
bool is_elementwise_op(Op);
/// The refs in `value` that a `where` masks (Triton's masked loads, which
/// touch only the lanes the mask selects): each ref inside a branch of a
/// `where(c, a, b)` whose branch is elementwise (arithmetic, comparisons,
/// `where`, is_elementwise_fn) over refs, names and constants, anything else
/// in it reading no ref, reached from the branch through those operations
/// (a subscript's own reads are not). Any other read loads its whole ref.
std::set<const Expr *> masked_loads(const Expr &value);
/// A masked load's mask: the condition of the nearest where above the ref;
/// its lanes load where `cond` holds (`holds`, the ref in the where's first
/// branch) or where it fails (in the second).
struct LoadMask {
  const Expr *cond;
  bool holds;
};
/// masked_loads' refs, each with its mask (the load's own, as in Triton's
/// `load(x, mask=m, other=v)`, which the export writes `where(m, x[s], v)`:
/// a where further out, a masked store's included, selects among the loaded
/// lanes and does not narrow what the load reads). The way down is
/// elementwise, so the condition broadcasts against the ref's value as
/// numpy does.
std::map<const Expr *, LoadMask> load_masks(const Expr &value);
/// A mask's value: its shape and, row-major, whether each element holds.
struct LaneMask {
  std::vector<std::int64_t> shape;
  std::vector<bool> on;
};
/// The lanes of a value of shape `value` that a where selects where every
/// one of `masks` holds, all broadcast together as numpy does (a value
/// broadcast along a dim is selected where any element along it is): flat,
/// row-major over `value`. nullopt where the shapes do not broadcast. What
/// a masked load (load_masks) reads, for the checker and the executor alike.
std::optional<std::vector<bool>> selected_lanes(const std::vector<LaneMask> &masks,
                                                const std::vector<std::int64_t> &value);

/// `name = value`: a local binding (tensor or integer).
struct Let {
  std::string name;
  Expr value;
  /// Bound by the parser for a subscripted expression (`exp(x)[:, None]`
  /// reads `__sub0[:, None]`, `__sub0 = exp(x)` just before): printed back in
  /// place, never as a statement.
  bool hoisted = false;
  friend bool operator==(const Let &, const Let &) = default;
};
/// `when cond:` (pl.when, kernel bodies) or `if cond: ... else: ...` (pipelines).
struct If {
  bool is_when = false;
  Expr cond;
  Block then_body;
  Block else_body;
  friend bool operator==(const If &, const If &);
};
/// `for var in range(lo, hi):`, or, with is_while, `while cond, bound=n:`
/// (lax.while_loop checked up to n iterations). A while is the bounded
/// unrolling every consumer already knows: var empty, lo 0, hi the bound,
/// and body exactly one `if cond:` (is_when false, no else) holding the
/// loop's statements. Once cond fails the body never runs again (cond has no
/// effects), so n guarded iterations are the while loop for every run of at
/// most n iterations; a run that needs more is the cond still holding after
/// the loop (while_exceeds_bound), which the consumers report: an error in
/// the executor, `unknown` in the checker.
struct For {
  std::string var;
  Expr lo; ///< Int 0 when written `range(hi)`
  Expr hi;
  Block body;
  bool is_while = false;
  friend bool operator==(const For &, const For &);
};
/// A while loop `while cond, bound=n:` with the given body, at `loc`.
For make_while(Expr cond, Expr bound, Block body, Loc loc);
/// A while loop's condition and statements (f.is_while).
const Expr &while_cond(const For &f);
const Block &while_body(const For &f);
/// "the while loop at line L may run past its bound N": what every consumer
/// says when the condition still holds after N iterations.
std::string while_bound_message(const Loc &loop, std::int64_t bound);
enum class CopyKind { in_start, in_wait, out_start, out_wait };
const char *to_string(CopyKind);
/// copy_in_start(src, dst), copy_in_wait(dst), copy_out_start(src, dst),
/// copy_out_wait(src). For waits only the slot argument is present (in `dst`
/// for copy_in_wait, in `src` for copy_out_wait); the other is Op::None.
/// A start may end in `offset=(o0, ...)`: where the hbm side lands in (is
/// read from) the slot side, one element offset per kept dim of the slot
/// side's ref (spec::fit_copy); without it, the leading corner.
struct Copy {
  CopyKind kind = CopyKind::in_start;
  Expr src;
  Expr dst;
  /// Op::None, or an Op::Tuple of integer expressions (starts only).
  Expr offset = Expr::leaf(Op::None);
  /// copy_out_wait(X[s], keep=True): the slot keeps its contents after the
  /// write-back, the block it holds staying in it (Mosaic GPU's one-slot
  /// output copied out mid-visit). Without it a waited write-back leaves the
  /// slot undefined: a slot keeps nothing for its next visit.
  bool keep = false;
  /// copy_in_start(x[...], X[s], zeros=True): the part of the slot the hbm
  /// region does not fill is filled with zeros, not left undefined (Mosaic
  /// GPU's TMA fetch of a ragged block, OOBFillMode.ZEROS).
  bool zeros = false;
  /// The ref a wait names (dst for in_wait, src for out_wait).
  const Expr &waited() const { return kind == CopyKind::in_wait ? dst : src; }
  friend bool operator==(const Copy &, const Copy &) = default;
};
/// wgmma(acc, a, b): asynchronous acc += a @ b reading a and b until retired.
/// `trans_a=True` / `trans_b=True` read that operand transposed (a stored
/// (k, m), b stored (n, k): Pallas' `plgpu.transpose_ref(k_ref, (1, 0))`).
struct Wgmma {
  Expr acc, a, b;
  bool trans_a = false, trans_b = false;
  friend bool operator==(const Wgmma &, const Wgmma &) = default;
};
/// wgmma_wait(n): at most n wgmmas remain in flight.
struct WgmmaWait {
  Expr n;
  friend bool operator==(const WgmmaWait &, const WgmmaWait &) = default;
};

/// A DMA or semaphore statement (pltpu.make_async_copy, pltpu.sync_copy,
/// pltpu.semaphore_signal / semaphore_wait):
/// - bind: `c = async_copy(src, dst, sem)` names a descriptor (no effect);
/// - start / wait: `c.start()`, `c.wait()` (descriptor set), or
///   `async_copy(src, dst, sem).start()` (method), or the primitives
///   `dma_start(src, dst, sem)` / `dma_wait(dst, sem)` (lowered programs);
///   a wait needs only dst and sem, as Pallas' dma_wait;
/// - sync_copy: `sync_copy(src, dst)`;
/// - signal / sem_wait: `semaphore_signal(sem, n)`, `semaphore_wait(sem, n)`.
/// Fields that a form does not write are Op::None.
enum class DmaAction { bind, start, wait, sync_copy, signal, sem_wait };
struct Dma {
  DmaAction action = DmaAction::start;
  std::string descriptor; ///< bind: the name bound; start/wait: `c.start()` when set
  bool method = false;    ///< written `async_copy(src, dst, sem).start()`
  Expr src, dst, sem, n;
  friend bool operator==(const Dma &, const Dma &) = default;
};

/// `emit_pipeline(grid=(...)):` in a kernel body (pltpu.emit_pipeline): an
/// inner pipeline with its own grid and BlockSpecs over the kernel's
/// `memory_space=any` operands, and its own body, which sees each spec's
/// name as its VMEM block. `specs` are `in`/`out` Operands whose dtype and
/// shape are left empty (the outer operand's). Inside the inner body and the
/// inner index maps, `program_id(a)` is the inner grid's (as Pallas'
/// scheduler.grid_env makes it).
struct EmitPipeline {
  std::vector<Expr> grid;
  std::vector<Operand> specs;
  Block body;
  Loc body_loc;
  Comments body_comments;
  friend bool operator==(const EmitPipeline &, const EmitPipeline &);
};

/// `commit_smem()` in a Mosaic GPU kernel body (plgpu.commit_smem, PTX's
/// fence.proxy.async): the body's stores into SMEM before it become visible
/// to what reads SMEM through the async proxy after it, a wgmma's operands
/// (and TMA). It has no effect on values: the lowering drops it, and the
/// spec rules check that every SMEM operand a wgmma reads that the body
/// stored into has one between the store and the wgmma.
struct CommitSmem {
  friend bool operator==(const CommitSmem &, const CommitSmem &) = default;
};

struct Stmt {
  std::variant<Assign, Let, If, For, Copy, Wgmma, WgmmaWait, Dma, EmitPipeline, CommitSmem> kind;
  Loc loc;
  Comments comments;
  friend bool operator==(const Stmt &, const Stmt &) = default;
};
std::ostream &operator<<(std::ostream &, const Stmt &);

/// Calls `f` on each expression statement `s` holds itself: an assignment's
/// target and value, a condition, loop bounds, a copy's or DMA's refs. Not
/// those of the blocks it holds (`when`/`for` bodies), nor an
/// emit_pipeline's (its grid, specs and body are the caller's to walk).
void for_each_expr(Stmt &s, const std::function<void(Expr &)> &f);
void for_each_expr(const Stmt &s, const std::function<void(const Expr &)> &f);
/// Calls `f` on `s` and on each statement of the blocks it holds (`when`
/// and `else`, `for` and emit_pipeline bodies), in order, a statement before
/// those it holds; on a block, on each of its statements so.
void for_each_stmt(const Stmt &s, const std::function<void(const Stmt &)> &f);
void for_each_stmt(const Block &b, const std::function<void(const Stmt &)> &f);
/// The ref statement `s` itself (not the blocks it holds) writes — a store's
/// target, a copy's or DMA's destination, a wgmma's accumulator — and what it
/// writes there from: a store's value, a copy's or DMA's source (nullptr for
/// a wgmma). Nullopt for a statement that writes no ref.
struct RefWrite {
  std::string ref;
  const Expr *from = nullptr;
};
std::optional<RefWrite> ref_write(const Stmt &s);
/// Adds every name `e` (or `s`, with the blocks it holds, or `b`) uses or
/// binds to `out`: refs, plain names, called functions, locals, loop
/// variables, DMA descriptors; so that a name made up for a kernel collides
/// with none of its own.
void collect_names(const Expr &e, std::set<std::string> &out);
/// What a chain of `broadcast_to(v, shape)` broadcasts (`v`), else `e`
/// itself: a where condition broadcast to the block (`broadcast_to(k == 0,
/// (8, 128))`, as jnp.full or [None, None] export it) is that condition.
const Expr &unbroadcast(const Expr &e);
void collect_names(const Stmt &s, std::set<std::string> &out);
void collect_names(const Block &b, std::set<std::string> &out);
struct KernelSpec;
/// Every name kernel `k` uses: its params, operands, prefetch arrays,
/// index-map arguments and what its body uses or binds (collect_names).
std::set<std::string> kernel_names(const KernelSpec &k);

// --------------------------------------------------------------- declarations

/// `param name = value [in {d...}]` or `param name >= lo [<= hi]`.
struct Param {
  std::string name;
  std::optional<Expr> value;  ///< a fixed (default) value
  std::vector<Expr> domain;   ///< fuzz domain, may be empty
  std::optional<Expr> lo, hi; ///< bounds of a symbolic param
  Loc loc;
  Comments comments;
  bool is_symbolic() const { return !value.has_value(); }
  friend bool operator==(const Param &, const Param &) = default;
};

/// `alias x -> o` (input_output_aliases).
struct Alias {
  std::string input, output;
  Loc loc;
  Comments comments;
  friend bool operator==(const Alias &, const Alias &) = default;
};

/// A `name = value` setting of a kernel (`target = h200`,
/// `vmem_limit_bytes = 64 * 2**20`, `max_concurrent_steps = 4`, ...).
struct Setting {
  std::string key;
  Expr value;
  Loc loc;
  Comments comments;
  friend bool operator==(const Setting &, const Setting &) = default;
};

/// `prefetch ids: i32[n] ...`: a scalar-prefetch operand
/// (PrefetchScalarGridSpec's num_scalar_prefetch), a 1-D integer array in
/// SMEM that index maps (as trailing arguments) and the body read. Its
/// contents are either given (`= [0, 0, 1, 2]`) or described by constraints
/// (`in [lo, hi)`, `nondecreasing`, `sum == s`, any combination).
struct Prefetch {
  std::string name;
  DType dtype = DType::i32;
  Expr length; ///< the element count: the one extent, or for rank > 1 the product of `dims`
  /// Rank > 1 (`i32[B, P]`): the extents as written; empty for a 1-D array.
  /// Its contents are in C order (`= [...]` lists them flat); a read names
  /// one element (`pt[b, p]`) until spec::flatten_prefetch_reads flattens it.
  std::vector<Expr> dims;
  bool flat = false; ///< rank > 1 with its reads flattened to `pt[e]` (spec/prefetch.hpp)
  std::optional<std::vector<Expr>> values; ///< given contents (read from `file` once loaded)
  /// `from "FILE"`: the contents are an integer .npy of the declared shape,
  /// FILE relative to the .pk's folder; parse_and_validate loads them into
  /// `values` (and its shape into `file_shape`).
  std::optional<std::string> file;
  Loc file_loc;
  std::optional<Expr> lo, hi; ///< `in [lo, hi)`
  bool nondecreasing = false;
  std::optional<Expr> sum; ///< `sum == s`
  Loc loc;
  Comments comments;
  std::vector<std::int64_t> file_shape; ///< the shape of the loaded `file`
  bool is_given() const { return values.has_value(); }
  /// The subscripts of one read: the rank, or 1 once flattened.
  std::size_t read_rank() const { return dims.empty() || flat ? 1 : dims.size(); }
  friend bool operator==(const Prefetch &, const Prefetch &) = default;
};

/// A `pallas_call`: grid, BlockSpecs, body.
struct KernelSpec {
  std::string name;
  std::vector<Param> params;
  std::optional<std::vector<Expr>> grid; ///< absent: `()`
  Loc grid_loc;
  Comments grid_comments;
  std::optional<std::vector<DimSemantics>> dimension_semantics;
  Loc dimension_semantics_loc;
  Comments dimension_semantics_comments;
  std::vector<Setting> settings; ///< target, vmem_limit_bytes, max_concurrent_steps, delay_release
  std::vector<Operand> operands; ///< ins, outs and scratch, in source order
  std::vector<Alias> aliases;
  Block body;
  Loc loc;
  Loc body_loc;
  Comments comments;
  Comments body_comments;
  /// `reference:` (after the body): the kernel's intent as `name = value`
  /// statements on whole operands (`o = dot(a, b)`); empty when absent.
  Block reference;
  Loc reference_loc; ///< line 0: no reference section
  Comments reference_comments;
  /// `prefetch` declarations (scalar prefetch), in source order. An index
  /// map takes the grid indices and then one name per prefetch operand.
  std::vector<Prefetch> prefetches;

  const Operand *operand(const std::string &n) const;
  const Prefetch *prefetch(const std::string &n) const;
  const Setting *setting(const std::string &key) const;
  const Param *param(const std::string &n) const;
  friend bool operator==(const KernelSpec &, const KernelSpec &) = default;
};

/// `sem`: an array of semaphores (`sem S: dma_sem[2]`), Buffer::sem says which kind.
enum class BufferKind { hbm, sram, smem, acc, sem };
const char *to_string(BufferKind);

/// `sram X[2]: f32[512]`: a buffer, optionally a ring of slots.
struct Buffer {
  BufferKind kind = BufferKind::sram;
  std::string name;
  std::optional<Expr> slots; ///< absent: not a ring (no slot index allowed)
  DType dtype = DType::f32;
  std::vector<Expr> shape;
  Loc loc;
  Comments comments;
  SemKind sem = SemKind::none; ///< BufferKind::sem: dma or regular
  friend bool operator==(const Buffer &, const Buffer &) = default;
};

/// A hand-written (or lowered) pipeline: buffers and statements.
struct Program {
  std::string name;
  std::vector<Param> params;
  std::vector<Buffer> buffers;
  Block body;
  Loc loc;
  Comments comments;

  const Buffer *buffer(const std::string &n) const;
  const Param *param(const std::string &n) const;
  friend bool operator==(const Program &, const Program &) = default;
};

/// A `# expect: rule[, rule...]` comment (clang -verify style).
struct Expectation {
  int line = 0;     ///< the line the comment is on
  std::string rule; ///< a rule id, or "verified"
  Loc loc;
  friend bool operator==(const Expectation &, const Expectation &) = default;
};

/// One `.pk` file: kernels and pipelines in source order.
struct File {
  std::vector<std::variant<KernelSpec, Program>> units;
  std::vector<Expectation> expectations;
  Comments trailing; ///< comments after the last unit (in `leading`)
  /// Units only: expectations and comments are source text, not IR.
  friend bool operator==(const File &a, const File &b) { return a.units == b.units; }
};

std::ostream &operator<<(std::ostream &, const KernelSpec &);
std::ostream &operator<<(std::ostream &, const Program &);
std::ostream &operator<<(std::ostream &, const File &);

/// A block dim `Element(size)`, `Element(size, (lo, hi))` or
/// `Element(size, padding=(lo, hi))` (pl.Element): the index map returns
/// the element offset `i` into the array padded by lo before and hi after,
/// and the window is padded elements [i, i + size), i.e. array elements
/// [i - lo, i - lo + size); the pad values are undefined.
struct ElementDim {
  Expr size;
  Expr lo; ///< Int 0 without padding
  Expr hi;
};
/// The Element form of block dim `b`, or nullopt when `b` is a plain extent
/// (or a malformed Element call, which validation reports).
std::optional<ElementDim> element_dim(const Expr &b);

/// The bound of block dim `b` when it is `BoundedSlice(bound)`
/// (pl.BoundedSlice): the index map returns `ds(start, size)` in its
/// position, the window is array elements [start, start + size) with
/// 0 <= size <= bound, and the block buffer holds `bound` elements of which
/// only the first `size` are copied. nullopt for any other block dim (a
/// malformed BoundedSlice call included, which validation reports).
std::optional<Expr> bounded_slice_dim(const Expr &b);

/// An index map result `ds(start, size)` (pl.ds), the index of a
/// BoundedSlice dim.
struct DsIndex {
  Expr start;
  Expr size;
};
/// `r` as `ds(start, size)` (two positional arguments), or nullopt.
std::optional<DsIndex> ds_index(const Expr &r);

/// The name of a unit.
const std::string &unit_name(const std::variant<KernelSpec, Program> &);
/// The source line of a unit's header.
Loc unit_loc(const std::variant<KernelSpec, Program> &);

} // namespace pipecheck::spec
