/** Hugging Face tokenizers (tokenizer.json, chat templates) behind the project's `Tokenizer` interface. */
export { HfTokenizer, loadHfTokenizer, type ChatMessage, type HfTokenizerFiles } from './hf-tokenizer.js';
export { TokenizerLoadError } from './errors.js';
