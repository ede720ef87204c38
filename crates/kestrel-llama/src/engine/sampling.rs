//! Token selection: the sampler chains of a request and the grammar-constrained choice of a
//! token, plus the small numeric helpers the worker uses.

use std::time::Instant;

use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use crate::request::GenerateRequest;

/// Candidates passed to the grammar at once. llama.cpp's grammar check allocates two
/// candidate-sized vectors per matched character and grammar stack, so checking all 49k tokens
/// of a vocabulary at once costs tens of MB of transient memory; chunks keep that small.
const GRAMMAR_CHUNK: usize = 2048;
/// Best-scoring tokens tried first when looking for the constrained argmax.
const GREEDY_HEAD: usize = 256;

/// Whether the grammar accepts `token` next.
pub(super) fn accepts(grammar: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut single = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
    grammar.apply(&mut single);
    single
        .data
        .first()
        .is_some_and(|d| d.logit() != f32::NEG_INFINITY)
}

/// Applies the grammar to `candidates` in chunks, setting rejected logits to -inf.
fn apply_chunked(grammar: &mut LlamaSampler, candidates: &mut [LlamaTokenData]) {
    for chunk in candidates.chunks_mut(GRAMMAR_CHUNK) {
        let mut array = LlamaTokenDataArray::new(chunk.to_vec(), false);
        grammar.apply(&mut array);
        // The grammar sampler only changes logits, in place and in order.
        for (slot, data) in chunk.iter_mut().zip(&array.data) {
            slot.set_logit(data.logit());
        }
    }
}

/// The highest-logit token the grammar accepts: the best few hundred tokens are checked
/// first, and the rest only if none of them fits.
pub(super) fn constrained_argmax(grammar: &mut LlamaSampler, logits: &[f32]) -> Option<LlamaToken> {
    let mut candidates: Vec<LlamaTokenData> = logits
        .iter()
        .enumerate()
        .map(|(id, &logit)| LlamaTokenData::new(LlamaToken(to_pos(id)), logit, 0.0))
        .collect();
    let head = GREEDY_HEAD.min(candidates.len());
    if head == 0 {
        return None;
    }
    candidates.select_nth_unstable_by(head - 1, |a, b| b.logit().total_cmp(&a.logit()));
    let (first, rest) = candidates.split_at_mut(head);
    for part in [first, rest] {
        apply_chunked(grammar, part);
        let best = part
            .iter()
            .filter(|d| d.logit() != f32::NEG_INFINITY)
            .max_by(|a, b| a.logit().total_cmp(&b.logit()));
        if let Some(best) = best {
            return Some(best.id());
        }
    }
    None
}

/// The whole vocabulary with the tokens the grammar rejects set to -inf.
pub(super) fn constrained_candidates(
    grammar: &mut LlamaSampler,
    logits: &[f32],
) -> LlamaTokenDataArray {
    let mut candidates: Vec<LlamaTokenData> = logits
        .iter()
        .enumerate()
        .map(|(id, &logit)| LlamaTokenData::new(LlamaToken(to_pos(id)), logit, 0.0))
        .collect();
    apply_chunked(grammar, &mut candidates);
    LlamaTokenDataArray::new(candidates, false)
}

/// Temperature 0 (or unset) is greedy; otherwise temperature, then top-p, then a seeded draw.
/// With a repeat penalty (and the vocabulary's size), that comes first.
pub(super) fn sampling_chain(
    request: &GenerateRequest,
    penalty: Option<(crate::request::RepeatPenalty, i32)>,
) -> LlamaSampler {
    let mut chain = Vec::new();
    if let Some((penalty, n_vocab)) = penalty {
        chain.push(LlamaSampler::penalties(
            n_vocab,
            i32::try_from(penalty.last_n.max(1)).unwrap_or(i32::MAX),
            penalty.penalty,
            0.0,
            0.0,
        ));
    }
    let temperature = request.temperature.unwrap_or(0.0);
    if temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
        return match chain.len() {
            1 => chain.remove(0),
            _ => LlamaSampler::chain_simple(chain),
        };
    }
    let seed = match request.seed {
        // Fold the 64-bit seed into llama.cpp's 32 bits.
        Some(seed) => (seed as u32) ^ ((seed >> 32) as u32),
        None => random_seed(),
    };
    chain.push(LlamaSampler::temp(temperature));
    if let Some(top_p) = request.top_p
        && top_p < 1.0
    {
        chain.push(LlamaSampler::top_p(top_p, 1));
    }
    chain.push(LlamaSampler::dist(seed));
    LlamaSampler::chain_simple(chain)
}

fn random_seed() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    // 0xFFFFFFFF means "random" to llama.cpp, which is fine too.
    hasher.finish() as u32
}

/// `log softmax(logits)[token]`.
pub(super) fn log_softmax_at(logits: &[f32], token: LlamaToken) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let logit = usize::try_from(token.0)
        .ok()
        .and_then(|i| logits.get(i))
        .copied()
        .unwrap_or(f32::NEG_INFINITY);
    logit - max - sum.ln()
}

pub(super) fn to_pos(position: usize) -> i32 {
    i32::try_from(position).unwrap_or(i32::MAX)
}

pub(super) fn elapsed_micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}
