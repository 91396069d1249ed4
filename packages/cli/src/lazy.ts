import * as Effect from "effect/Effect"

/**
 * A command's work, loaded when the command runs: the module `load`
 * imports, then `run` on it. The command tree (what `--help` and the
 * argument checks read) imports @effect/cli and the options only, so a
 * command loads the store, its SQL drivers or the simulation only when it
 * needs them, not each time the CLI starts.
 */
export const loaded = <M, A, E, R>(load: () => Promise<M>, run: (module: M) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.promise(load), run)
