import { createHash } from "node:crypto"

/** A source of numbers in [0, 1), fully determined by the seed it was made from. */
export interface Draw {
  /** The next number in [0, 1). */
  readonly next: () => number
  /** An integer in [min, max]. */
  readonly int: (min: number, max: number) => number
  /** True with probability `p`. */
  readonly chance: (p: number) => boolean
  /** One element of a non-empty list. */
  readonly pick: <A>(items: ReadonlyArray<A>) => A
}

/** A 32-bit hash of the seed and keys, order-sensitive and unambiguous (FNV-1a over a JSON list). */
const hash32 = (parts: ReadonlyArray<string | number>): number => {
  const text = JSON.stringify(parts)
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h
}

/**
 * A seeded draw keyed by `keys` (mulberry32). Every random decision of the
 * fake world is taken from a draw keyed by what it is about (an operation and
 * its request number, a crash site, …), never from a shared stream, so the
 * same seed gives the same decision however the runners interleave.
 */
export const seeded = (seed: string | number, ...keys: ReadonlyArray<string | number>): Draw => {
  let state = hash32([seed, ...keys])
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)]!
  }
}

/** The digest of a document's content as both sides project it (what verifiers and relists compare). */
export const digestOf = (content: unknown): string =>
  "sha256:" + createHash("sha256").update(JSON.stringify(content)).digest("hex").slice(0, 16)

/** `length` characters of `alphabet` drawn from `draw` (a seeded token: the same seed gives the same one). */
export const seededToken = (
  draw: Draw,
  length: number,
  alphabet = "0123456789abcdef"
): string => Array.from({ length }, () => alphabet[Math.floor(draw.next() * alphabet.length)]).join("")
