import { RlvrError } from '../core/errors.js';

/** Something that needs Node (a file, a path) was asked for in a page. Names the operation. */
export class NodeOnlyError extends RlvrError {
  constructor(readonly operation: string) {
    super(
      `${operation} needs Node (files and paths do not exist in a page): leave outputDir and resume unset there, ` +
        'and save checkpoints as bytes (checkpointToBytes / checkpointFromBytes)',
    );
  }
}
