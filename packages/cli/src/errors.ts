import * as Data from "effect/Data"

/** A failure the CLI reports as one line on stderr, with a non-zero exit. */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

/**
 * What went wrong, from any error the store or the CLI raises: its message
 * and its cause's. A line break in it stays, for the printer to show as an
 * escape (`printable`): an id that holds one is shown as it is.
 */
export const describeError = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause
    const own = error.message.length > 0 ? error.message : (error as { _tag?: string })._tag ?? "error"
    return cause instanceof Error && !own.includes(cause.message) ? `${own}: ${cause.message}` : own
  }
  return String(error)
}
