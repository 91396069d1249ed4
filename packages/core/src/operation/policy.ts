import { Context, Effect, Layer } from "effect"
import { InvalidInput } from "../errors.js"
import { allOptionNames, unknownKeyOf } from "../optionNames.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** How a retry delay is drawn: `full` in [0, ceiling), `equal` in [ceiling/2, ceiling), `none` the ceiling. */
export type Jitter = "full" | "equal" | "none"

/** Exponential backoff: the ceiling doubles per spent attempt, from `baseDelayMs` up to `maxDelayMs`. */
export interface BackoffPolicy {
  /** The first retry's ceiling, in ms (default 1 s). */
  readonly baseDelayMs: number
  /** The largest ceiling, in ms (default 5 min); at least `baseDelayMs`. */
  readonly maxDelayMs: number
  /** Where in `[0, ceiling)` a delay is drawn: `equal` (the upper half, default), `full` (all of it) or `none` (the ceiling). */
  readonly jitter: Jitter
}

/** The store-wide rules every runner of a store shares. */
export interface OperationPolicySettings {
  /** How long a lease lasts when the claim or renewal names no duration. */
  readonly leaseMs: number
  /** Provider requests an operation may start; the one that would exceed it is never started. */
  readonly maxAttempts: number
  /** The retry delays after a spent attempt: `{ baseDelayMs, maxDelayMs, jitter }`. */
  readonly backoff: BackoffPolicy
  /** How far an offline or auth deferral pushes the next attempt when the runner names no time. */
  readonly deferMs: number
}

/** The defaults: 30 s leases, 8 attempts, backoff from 1 s to 5 min with equal jitter, 15 min deferrals. */
export const DEFAULT_OPERATION_POLICY: OperationPolicySettings = {
  leaseMs: 30_000,
  maxAttempts: 8,
  backoff: { baseDelayMs: 1_000, maxDelayMs: 300_000, jitter: "equal" },
  deferMs: 900_000
}

/**
 * A store's operation policy (the defaults unless a layer provides another); a database's runners should share it,
 * since the attempt limit is not stored.
 */
export class OperationPolicy extends Context.Reference<OperationPolicy>()("@connector-store/core/OperationPolicy", {
  defaultValue: (): OperationPolicySettings => DEFAULT_OPERATION_POLICY
}) {
  /** The policy `overrides` make over the defaults, as a layer; a setting out of range fails it with `InvalidInput`. */
  static readonly layer = (overrides: OperationPolicyOverrides = {}): Layer.Layer<OperationPolicy, InvalidInput> =>
    Layer.effect(
      OperationPolicy,
      Effect.suspend(() => {
        const problem = operationPolicyProblem(overrides)
        return problem === undefined
          ? Effect.succeed(operationPolicyFrom(overrides))
          : Effect.fail(new InvalidInput({ method: "operationPolicy", field: problem.field, reason: problem.reason }))
      })
    )
}

/** A partial policy over the defaults, e.g. `{ maxAttempts: 5, backoff: { baseDelayMs: 500, maxDelayMs: 60_000 } }`. */
export interface OperationPolicyOverrides {
  /** How long a claim's lease lasts, in ms (default 30 s). */
  readonly leaseMs?: number | undefined
  /** Provider requests an operation may start (default 8). */
  readonly maxAttempts?: number | undefined
  /** The backoff, nested: `{ baseDelayMs, maxDelayMs, jitter }`, each optional. */
  readonly backoff?: Partial<BackoffPolicy> | undefined
  /** How far an offline or auth deferral pushes the next attempt when the runner names no time, in ms (default 15 min). */
  readonly deferMs?: number | undefined
}

const merged = (overrides: OperationPolicyOverrides): OperationPolicySettings => {
  const d = DEFAULT_OPERATION_POLICY
  return {
    leaseMs: overrides.leaseMs ?? d.leaseMs,
    maxAttempts: overrides.maxAttempts ?? d.maxAttempts,
    backoff: {
      baseDelayMs: overrides.backoff?.baseDelayMs ?? d.backoff.baseDelayMs,
      maxDelayMs: overrides.backoff?.maxDelayMs ?? d.backoff.maxDelayMs,
      jitter: overrides.backoff?.jitter ?? d.backoff.jitter
    },
    deferMs: overrides.deferMs ?? d.deferMs
  }
}

const DAY = 86_400_000
const POLICY_SETTINGS = allOptionNames<OperationPolicyOverrides>()(["leaseMs", "maxAttempts", "backoff", "deferMs"])
const BACKOFF_SETTINGS = allOptionNames<BackoffPolicy>()(["baseDelayMs", "maxDelayMs", "jitter"])

/** The first setting of `overrides` a store cannot keep, or `undefined`; an unknown name is refused first, naming the nearest. */
export const operationPolicyProblem = (
  overrides: OperationPolicyOverrides
): { readonly field: string; readonly reason: string } | undefined => {
  const unknown = unknownKeyOf(overrides, POLICY_SETTINGS, "a policy setting")
  if (unknown !== undefined) return { field: unknown.key, reason: unknown.reason }
  const backoff: unknown = overrides.backoff
  if (backoff !== undefined) {
    if (typeof backoff !== "object" || backoff === null || Array.isArray(backoff)) return { field: "backoff", reason: "must be an object" }
    const unknownBackoff = unknownKeyOf(backoff, BACKOFF_SETTINGS, "a backoff setting")
    if (unknownBackoff !== undefined) return { field: `backoff.${unknownBackoff.key}`, reason: unknownBackoff.reason }
  }
  const p = merged(overrides)
  const checks: ReadonlyArray<readonly [string, unknown, number]> = [
    ["leaseMs", p.leaseMs, DAY],
    ["maxAttempts", p.maxAttempts, 1_000],
    ["backoff.baseDelayMs", p.backoff.baseDelayMs, DAY],
    ["backoff.maxDelayMs", p.backoff.maxDelayMs, 30 * DAY],
    ["deferMs", p.deferMs, 30 * DAY]
  ]
  for (const [field, value, max] of checks) {
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0 || value > max) {
      return { field, reason: `must be a positive integer of at most ${max}` }
    }
  }
  if (p.backoff.maxDelayMs < p.backoff.baseDelayMs) return { field: "backoff.maxDelayMs", reason: "is below backoff.baseDelayMs" }
  if (!["full", "equal", "none"].includes(p.backoff.jitter)) return { field: "backoff.jitter", reason: "must be full, equal or none" }
  return undefined
}

/** The full policy from `overrides` over the defaults; throws a `RangeError` naming a setting it cannot keep. */
export const operationPolicyFrom = (overrides: OperationPolicyOverrides = {}): OperationPolicySettings => {
  const problem = operationPolicyProblem(overrides)
  if (problem !== undefined) throw new RangeError(`operation policy: ${problem.field} ${problem.reason}`)
  return merged(overrides)
}

/** The delay after `attempts` spent attempts: ceiling = min(max, base · 2^(attempts−1)), drawn by the jitter from `random` ∈ [0, 1). */
export const backoffDelay = (attempts: number, policy: BackoffPolicy, random: number): Millis => {
  const exponent = Math.min(Math.max(attempts - 1, 0), 52)
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** exponent)
  const r = Math.min(Math.max(random, 0), 1 - Number.EPSILON)
  switch (policy.jitter) {
    case "none":
      return ceiling
    case "full":
      return Math.floor(r * ceiling)
    case "equal": {
      const half = Math.floor(ceiling / 2)
      return half + Math.floor(r * (ceiling - half))
    }
  }
}
