// A small seeded PRNG (mulberry32), so one seed replays the same fault
// schedule as far as the processes' timing allows.

/** A PRNG from a 32-bit seed: `next()` in [0, 1), `int(n)` in [0, n), `chance(p)`, `between(lo, hi)`, `pick(xs)`. */
export const prng = (seed) => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (n) => Math.floor(next() * n),
    chance: (p) => next() < p,
    between: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (xs) => xs[Math.floor(next() * xs.length)]
  }
}

/** Mixes a seed with a label (a worker's index, "provider", …) into a new 32-bit seed. */
export const derive = (seed, label) => {
  let h = (seed ^ 0x9e3779b9) >>> 0
  for (const ch of String(label)) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0
  return h
}
