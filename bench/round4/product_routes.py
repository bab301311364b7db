import torch, time
torch.manual_seed(0)
def bench(fn, n=30):
    for _ in range(3): fn()
    t=time.perf_counter()
    for _ in range(n): fn()
    return (time.perf_counter()-t)/n*1e3
M=16
for (N,K) in [(576,576),(1536,576),(576,1536),(49152,576)]:
    W = torch.randn(N,K); x = torch.randn(M,K)
    ref = torch.nn.functional.linear(x,W)
    res = {}
    res['linear'] = (bench(lambda: torch.nn.functional.linear(x,W)), True)
    try:
        P = torch.ops.mkl._mkl_reorder_linear_weight(W, M)
        y = torch.ops.mkl._mkl_linear(x, P, W, None, M)
        res['mkl_packed'] = (bench(lambda: torch.ops.mkl._mkl_linear(x, P, W, None, M)), torch.equal(y,ref))
    except Exception as e: print('mkl', e)
    try:
        Wm = torch.ops.mkldnn._reorder_linear_weight(W, M) if hasattr(torch.ops.mkldnn,'_reorder_linear_weight') else None
    except Exception as e: print('dnn', e); Wm=None
    for c in (2048, 4096, 8192):
        if N > c:
            ch = list(W.split(c))
            f = lambda: torch.cat([torch.nn.functional.linear(x,w) for w in ch],-1)
            res[f'chunk{c}'] = (bench(f), torch.equal(f(),ref))
    # mkldnn
    try:
        import torch.utils.mkldnn as mu
        lin = torch.nn.Linear(K,N,bias=False); lin.weight.data = W
        ml = mu.to_mkldnn(lin)
        xm = x.to_mkldnn()
        f = lambda: ml(xm).to_dense()
        res['mkldnn'] = (bench(f), torch.equal(f(), ref))
    except Exception as e: print('mkldnn', e)
    fl=2*M*N*K
    print(N,K, {k:(round(v,3), round(fl/v/1e6,1), eq) for k,(v,eq) in res.items()})
