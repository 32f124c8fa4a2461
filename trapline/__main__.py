from trapline.cli import main

if __name__ == "__main__":  # not when multiprocessing (a sweep's Dask workers) imports it as __mp_main__
    raise SystemExit(main())
