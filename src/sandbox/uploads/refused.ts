/** An upload refused with an HTTP status, error type and a message naming the field. Thrown inside the upload routes only. */
export class Refused extends Error {
  readonly status: number;
  readonly type: string;
  constructor(status: number, type: string, message: string) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export const invalid = (message: string) => new Refused(400, 'validation_error', message);
export const badFile = (message: string) => new Refused(400, 'file_format_error', message);
