/**
 * A tiny H.264 (AVC) encoder for the sandbox's video results: Constrained
 * Baseline profile, CAVLC, 4:2:0, one slice per picture. It draws one flat
 * colour and nothing else:
 *  - the IDR picture codes its first macroblock as I_PCM (raw samples of the
 *    colour) and every other macroblock as Intra 16x16 DC prediction with no
 *    residual (8 bits each), so DC prediction spreads the colour everywhere;
 *  - each later picture is a P picture whose macroblocks are all skipped
 *    (a copy of the previous one, a few bytes).
 * Odd sizes are rounded up to even (4:2:0 cropping works in 2-pixel units).
 */

class BitWriter {
  private readonly out: number[] = [];
  private cur = 0;
  private used = 0;

  bit(b: number): void {
    this.cur = (this.cur << 1) | (b & 1);
    if (++this.used === 8) {
      this.out.push(this.cur);
      this.cur = 0;
      this.used = 0;
    }
  }

  u(bits: number, value: number): void {
    for (let i = bits - 1; i >= 0; i--) this.bit(Math.floor(value / 2 ** i) & 1);
  }

  /** Exp-Golomb unsigned. */
  ue(value: number): void {
    const x = value + 1;
    const len = Math.floor(Math.log2(x));
    this.u(len, 0);
    this.u(len + 1, x);
  }

  /** Exp-Golomb signed. */
  se(value: number): void {
    this.ue(value <= 0 ? -2 * value : 2 * value - 1);
  }

  /** Bits string such as "000011". */
  bits(s: string): void {
    for (const c of s) this.bit(c === '1' ? 1 : 0);
  }

  get aligned(): boolean {
    return this.used === 0;
  }

  alignZero(): void {
    while (this.used !== 0) this.bit(0);
  }

  bytes(data: ArrayLike<number>): void {
    if (this.used !== 0) throw new Error('bytes() needs byte alignment');
    for (let i = 0; i < data.length; i++) this.out.push(data[i]! & 0xff);
  }

  /** rbsp_trailing_bits(): a one bit, then zeros to the byte boundary. */
  finish(): Buffer {
    this.bit(1);
    this.alignZero();
    return Buffer.from(this.out);
  }
}

/** NAL unit (header byte + emulation-prevented payload), without start code or length prefix. */
function nal(refIdc: number, type: number, rbsp: Buffer): Buffer {
  const out: number[] = [(refIdc << 5) | type];
  let zeros = 0;
  for (const b of rbsp) {
    if (zeros >= 2 && b <= 3) {
      out.push(3);
      zeros = 0;
    }
    out.push(b);
    zeros = b === 0 ? zeros + 1 : 0;
  }
  return Buffer.from(out);
}

/** [level_idc, MaxFS in macroblocks] from Table A-1, from level 3.0 up. */
const LEVELS: ReadonlyArray<readonly [number, number]> = [
  [30, 1620], [31, 3600], [32, 5120], [40, 8192], [42, 8704], [50, 22080], [51, 36864], [60, 139264],
];

export interface AvcStream {
  sps: Buffer;
  pps: Buffer;
  /** Coded (visible) size after rounding odd sizes up to even. */
  width: number;
  height: number;
  /** The IDR picture NAL unit. */
  idr: Buffer;
  /** The skipped P picture NAL unit for the n-th picture after the IDR (n >= 1). */
  skip(n: number): Buffer;
}

/** Colour as 8-bit Y, Cb, Cr (BT.601, limited range). */
export type Ycc = readonly [number, number, number];

export function rgbToYcc(r: number, g: number, b: number): Ycc {
  const clamp = (v: number): number => Math.min(235, Math.max(16, Math.round(v)));
  return [
    clamp(16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255),
    clamp(128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255),
    clamp(128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255),
  ];
}

export function encodeFlat(width: number, height: number, color: Ycc): AvcStream {
  const w = width + (width & 1);
  const h = height + (height & 1);
  const mbW = Math.ceil(w / 16);
  const mbH = Math.ceil(h / 16);
  const mbs = mbW * mbH;
  const level = LEVELS.find(([, maxFs]) => mbs <= maxFs && Math.max(mbW, mbH) <= Math.sqrt(8 * maxFs));
  if (!level) throw new RangeError(`video size ${width}x${height} is over H.264 level 6 limits`);

  const sps = new BitWriter();
  sps.u(8, 66); // profile_idc: Baseline
  sps.u(8, 0xc0); // constraint_set0 and set1: Constrained Baseline
  sps.u(8, level[0]);
  sps.ue(0); // seq_parameter_set_id
  sps.ue(0); // log2_max_frame_num_minus4: frame_num has 4 bits
  sps.ue(2); // pic_order_cnt_type 2: output order = decoding order
  sps.ue(1); // max_num_ref_frames
  sps.u(1, 0); // gaps_in_frame_num_value_allowed_flag
  sps.ue(mbW - 1);
  sps.ue(mbH - 1);
  sps.u(1, 1); // frame_mbs_only_flag
  sps.u(1, 1); // direct_8x8_inference_flag
  const cropRight = (mbW * 16 - w) / 2;
  const cropBottom = (mbH * 16 - h) / 2;
  if (cropRight || cropBottom) {
    sps.u(1, 1);
    sps.ue(0);
    sps.ue(cropRight);
    sps.ue(0);
    sps.ue(cropBottom);
  } else sps.u(1, 0);
  sps.u(1, 0); // vui_parameters_present_flag

  const pps = new BitWriter();
  pps.ue(0); // pic_parameter_set_id
  pps.ue(0); // seq_parameter_set_id
  pps.u(1, 0); // entropy_coding_mode_flag: CAVLC
  pps.u(1, 0); // bottom_field_pic_order_in_frame_present_flag
  pps.ue(0); // num_slice_groups_minus1
  pps.ue(0); // num_ref_idx_l0_default_active_minus1
  pps.ue(0); // num_ref_idx_l1_default_active_minus1
  pps.u(1, 0); // weighted_pred_flag
  pps.u(2, 0); // weighted_bipred_idc
  pps.se(0); // pic_init_qp_minus26
  pps.se(0); // pic_init_qs_minus26
  pps.se(0); // chroma_qp_index_offset
  pps.u(1, 0); // deblocking_filter_control_present_flag
  pps.u(1, 0); // constrained_intra_pred_flag
  pps.u(1, 0); // redundant_pic_cnt_present_flag

  const idr = new BitWriter();
  idr.ue(0); // first_mb_in_slice
  idr.ue(7); // slice_type: I (all slices)
  idr.ue(0); // pic_parameter_set_id
  idr.u(4, 0); // frame_num
  idr.ue(0); // idr_pic_id
  idr.u(1, 0); // no_output_of_prior_pics_flag
  idr.u(1, 0); // long_term_reference_flag
  idr.se(0); // slice_qp_delta
  // Macroblock 0: I_PCM with the colour.
  idr.ue(25);
  idr.alignZero(); // pcm_alignment_zero_bit
  const [y, cb, cr] = color;
  idr.bytes(new Uint8Array(256).fill(y));
  idr.bytes(new Uint8Array(64).fill(cb));
  idr.bytes(new Uint8Array(64).fill(cr));
  for (let addr = 1; addr < mbs; addr++) {
    idr.ue(3); // mb_type I_16x16_2_0_0: DC prediction, no coded luma AC or chroma
    idr.ue(0); // intra_chroma_pred_mode: DC
    idr.se(0); // mb_qp_delta
    // Intra16x16DCLevel with no coefficient: coeff_token(TotalCoeff 0) in the table chosen by nC.
    // Neighbour blocks count 16 coefficients for an I_PCM macroblock (address 0) and 0 otherwise.
    const col = addr % mbW;
    const left = col > 0 ? (addr - 1 === 0 ? 16 : 0) : null;
    const top = addr >= mbW ? (addr - mbW === 0 ? 16 : 0) : null;
    const nC = left !== null && top !== null ? (left + top + 1) >> 1 : (left ?? top ?? 0);
    idr.bits(nC < 2 ? '1' : nC < 4 ? '11' : nC < 8 ? '1111' : '000011');
  }

  const spsNal = nal(3, 7, sps.finish());
  const ppsNal = nal(3, 8, pps.finish());
  const idrNal = nal(3, 5, idr.finish());
  return {
    sps: spsNal,
    pps: ppsNal,
    width: w,
    height: h,
    idr: idrNal,
    skip(n: number): Buffer {
      const p = new BitWriter();
      p.ue(0); // first_mb_in_slice
      p.ue(5); // slice_type: P (all slices)
      p.ue(0); // pic_parameter_set_id
      p.u(4, n % 16); // frame_num (every picture is a reference picture)
      p.u(1, 0); // num_ref_idx_active_override_flag
      p.u(1, 0); // ref_pic_list_modification_flag_l0
      p.u(1, 0); // adaptive_ref_pic_marking_mode_flag: sliding window
      p.se(0); // slice_qp_delta
      p.ue(mbs); // mb_skip_run: every macroblock
      return nal(2, 1, p.finish());
    },
  };
}
