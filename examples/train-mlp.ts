/**
 * The foundation's main job in miniature: a two-layer MLP fits a toy regression, y = sin(2 x1) + x2^2 / 2,
 * with `valueAndGrad` and plain gradient descent, printing a falling loss.
 *
 *   npm run example:mlp
 */
import {
  add,
  dispose,
  matmul,
  mean,
  mul,
  Rng,
  randn,
  square,
  sub,
  tanh,
  tensor,
  tidy,
  treeZip,
  valueAndGrad,
  zeros,
  type Tensor,
} from '../src/index.js';

interface Mlp {
  readonly w1: Tensor;
  readonly b1: Tensor;
  readonly w2: Tensor;
  readonly b2: Tensor;
}

const rng = new Rng(0);
const [n, hidden] = [256, 32];
const xs = Array.from({ length: n * 2 }, () => rng.uniform() * 4 - 2);
const ys = Array.from({ length: n }, (_, i) => Math.sin(2 * xs[2 * i]!) + xs[2 * i + 1]! ** 2 / 2);
const x = tensor(xs, [n, 2]);
const y = tensor(ys, [n, 1]);

let params: Mlp = {
  w1: randn([2, hidden], rng, { std: 1 / Math.sqrt(2) }),
  b1: zeros([hidden]),
  w2: randn([hidden, 1], rng, { std: 1 / Math.sqrt(hidden) }),
  b2: zeros([1]),
};

const predict = (p: Mlp, input: Tensor): Tensor => add(matmul(tanh(add(matmul(input, p.w1), p.b1)), p.w2), p.b2);
const loss = (p: Mlp): Tensor => mean(square(sub(predict(p, x), y)));
const step = valueAndGrad(loss);

const lr = 0.05;
const steps = 2000;
for (let i = 0; i <= steps; i++) {
  const [value, grads] = step(params);
  const next = tidy(() => treeZip([params, grads], ([p, g]) => sub(p!, mul(g!, lr))));
  dispose([params, grads]);
  params = next;
  if (i % 200 === 0) console.log(`step ${String(i).padStart(4)}  loss ${value.itemSync().toFixed(5)}`);
  value.dispose();
}
