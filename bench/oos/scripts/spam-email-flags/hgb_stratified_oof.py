# idiom: StratifiedKFold loop, out-of-fold AUC, HistGradientBoosting, fold-averaged test predictions; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

TARGET = "yesno"
features = [c for c in train.columns if c not in ("id", TARGET)]
X = train[features]
y = (train[TARGET] == "y").astype(int).values
X_test = test[features]

oof = np.zeros(len(train))
test_pred = np.zeros(len(test))
skf = StratifiedKFold(n_splits=5, shuffle=True, random_state=42)
for fold, (tr_idx, va_idx) in enumerate(skf.split(X, y)):
    model = HistGradientBoostingClassifier(learning_rate=0.05, max_iter=300, max_leaf_nodes=31,
                                           l2_regularization=1.0, random_state=fold)
    model.fit(X.iloc[tr_idx], y[tr_idx])
    oof[va_idx] = model.predict_proba(X.iloc[va_idx])[:, 1]
    test_pred += model.predict_proba(X_test)[:, 1] / skf.n_splits
    print(f"fold {fold}: AUC = {roc_auc_score(y[va_idx], oof[va_idx]):.4f}")

print(f"OOF AUC: {roc_auc_score(y, oof):.4f}")

submission = pd.DataFrame({"id": test["id"], "yesno": test_pred})
submission.to_csv("submission.csv", index=False)
print(submission.head())
