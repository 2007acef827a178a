"""The kernels jax itself ships (jax.experimental.pallas.ops), exported from the installed jax
and checked: what pipecheck says of the real thing, not of a transcription."""
import importlib.util
import inspect

import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as pak

import pipecheck_jax as pj

B, H, D, S, P, C = 2, 8, 128, 16, 8, 2  # batch, heads, head_dim, page_size, pages, per block


def paged(q, k, v, lengths, pages):
    return pak.paged_attention(q, k, v, lengths, pages, pages_per_compute_block=C)


def args():
    return (jnp.zeros((B, H, D), jnp.float32), jnp.zeros((1, B * P, S, D), jnp.float32),
            jnp.zeros((1, B * P, S, D), jnp.float32), jnp.array([S * P, 3], jnp.int32),
            jnp.arange(B * P, dtype=jnp.int32).reshape(B, P))


# paged_attention passes its tables through jit, so the export describes them: every sequence
# length below 4 tokens (empty ones too, which the kernel's search for the next sequence with
# pages skips), every page table into the pool, and the bookkeeping's start values (the
# jnp.zeros((1,)) and jnp.ones((1,)) the function builds).
PREFETCH = {"lengths_ref": "in [0, 4)", "page_indices_ref": f"in [0, {B * P})",
            "buffer_index_ref": "in [0, 1)", "init_flag_ref": "in [1, 2)"}


def test_upstream_paged_attention_exports_its_buffer_index_and_init_flag_as_smem_state():
    text = pj.export(paged, *args(), prefetch=PREFETCH)
    # init_flag is read, then cleared; the read is bound where it is, before the store.
    read = text.index("= init_flag_ref[0]")
    assert read < text.index("init_flag_ref[0] = 0") < text.index("buffer_index_ref[0] = where("), text
    assert "memory_space=any" in text and "async_copy(k_pages_hbm_ref[" in text, text


def test_upstream_paged_attention_is_verified_for_every_length_and_page_table_allowed():
    r = pj.check(paged, *args(), prefetch=PREFETCH)
    assert r.verdicts == {"paged_flash_attention_kernel_inline_seq_dim": "verified"}, r.report()


def test_upstream_paged_attention_that_never_flips_its_buffer_index_is_a_violation(tmp_path):
    # The installed kernel's source with one statement removed, as an author might forget it.
    src = inspect.getsource(pak)
    store = "buffer_index_ref[0] = next_buffer_index"
    assert src.count(store) == 1
    path = tmp_path / "paged_attention_mutant.py"
    path.write_text(src.replace(store, "pass  # mutant: the buffer index is never flipped"))
    spec = importlib.util.spec_from_file_location("paged_attention_mutant", path)
    mutant = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutant)

    def paged_mutant(q, k, v, lengths, pages):
        return mutant.paged_attention(q, k, v, lengths, pages, pages_per_compute_block=C)

    # buffer_index is no longer stored, so it is an ordinary prefetch array read in the body;
    # one page table keeps the race check to one program per allowed contents.
    prefetch = dict(PREFETCH, page_indices_ref="in [0, 1)")
    r = pj.check(paged_mutant, *args(), prefetch=prefetch)
    assert r.verdicts == {"paged_flash_attention_kernel_inline_seq_dim": "violation"}, r.report()
    assert "copy-never-waited" in {f.rule for f in r.findings}, r.report()
