import { RlvrError } from '../core/errors.js';

/**
 * A model directory's tokenizer files at fault: tokenizer.json, tokenizer_config.json, generation_config.json or
 * chat_template.jinja unreadable, malformed, or refused by a check (exit 3).
 */
export class TokenizerLoadError extends RlvrError {
  constructor(
    /** The file's name (tokenizer.json, tokenizer_config.json, ...). */
    readonly file: string,
    /** The field at fault, or the file's name when the file as a whole is. */
    readonly field: string,
    detail: string,
    /** The file's whole path, when known (the message names it). */
    readonly path?: string,
  ) {
    super(`tokenizer: ${path ?? file}: ${field === file ? '' : `${field}: `}${detail}`);
  }
}
